/*
 * nvidia-smi -q (placeholder until the NVSMI LOG printer lands).
 */
#include "cli/smi.h"

#include "gpuscope/gs_err.h"

int gs_smi_q(FILE *out, const struct gs_snapshot *s, const unsigned char *sel, unsigned sections,
             int xml)
{
    (void)out, (void)s, (void)sel, (void)sections, (void)xml;
    printf("-q is not supported yet\n");
    return GS_ENOTSUP;
}
