/*
 * The error record (gs_err) and the mapping from gpuscope codes to messages and exit codes.
 */
#include "gpuscope/gs_err.h"

#include <stdarg.h>
#include <stdio.h>

int gs_err_set(struct gs_err *err, int rc, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        err->rc = rc;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return rc;
}

void gs_err_clear(struct gs_err *err)
{
    if (err) {
        err->rc = GS_OK;
        err->msg[0] = '\0';
    }
}

const char *gs_strerror(int rc)
{
    switch (rc) {
    case GS_OK:
        return "success";
    case GS_ENOMEM:
        return "out of memory";
    case GS_EINVAL:
        return "invalid argument";
    case GS_ENOLIB:
        return "NVML library not found";
    case GS_ENODRIVER:
        return "NVIDIA driver not loaded";
    case GS_EMISMATCH:
        return "driver/library version mismatch";
    case GS_ENOGPU:
        return "no GPU found";
    case GS_ELOST:
        return "GPU is lost";
    case GS_ENOTSUP:
        return "not supported";
    case GS_EPERM:
        return "insufficient permissions";
    case GS_EIO:
        return "I/O error";
    case GS_ENOTFOUND:
        return "not found";
    case GS_EPARSE:
        return "parse error";
    case GS_ENVML:
        return "NVML error";
    case GS_EUSAGE:
        return "bad usage";
    }
    return "unknown error";
}

int gs_rc_exit_code(int rc)
{
    switch (rc) {
    case GS_OK:
        return 0;
    case GS_EINVAL:
    case GS_EUSAGE:
    case GS_EPARSE:
        return 2;
    case GS_ENOTSUP:
        return 3;
    case GS_EPERM:
        return 4;
    case GS_ENOGPU:
    case GS_ENOTFOUND:
        return 6;
    case GS_ENODRIVER:
        return 9;
    case GS_ENOLIB:
        return 12;
    case GS_ELOST:
        return 15;
    case GS_EMISMATCH:
        return 18;
    }
    return 255;
}
