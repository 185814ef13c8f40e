/*
 * The backend links against src/base alone (docs/ARCHITECTURE.md, Layers): this program is
 * linked with gs_backend and gs_base only, so a call from src/backend into a higher layer
 * (src/core drives the backend, never the reverse) fails the build. Run, it says so in TAP.
 */
#include <stdio.h>

#include "backend/backend.h"
#include "backend/procfs.h"
#include "gpuscope/gs_err.h"

int main(void)
{
    struct gs_procfs *pf = NULL;
    struct gs_err err = {0};
    int rc = gs_procfs_open(&pf, NULL, &err);

    gs_procfs_close(pf);
    printf("1..1\n%s 1 - src/backend links against src/base alone (nvml %s, procfs %s)\n",
           gs_backend_nvml.name ? "ok" : "not ok", gs_backend_nvml.name ? "linked" : "missing",
           gs_strerror(rc));
    return 0;
}
