/*
 * nvidia-smi dmon / pmon / topo (placeholder until the monitors land).
 */
#include "cli/smi.h"

#include "gpuscope/gs_err.h"

int gs_smi_dmon(int argc, char **argv, const char *prog)
{
    (void)argc, (void)argv, (void)prog;
    printf("dmon is not supported yet\n");
    return 3;
}

int gs_smi_pmon(int argc, char **argv, const char *prog)
{
    (void)argc, (void)argv, (void)prog;
    printf("pmon is not supported yet\n");
    return 3;
}

int gs_smi_topo(int argc, char **argv, const char *prog)
{
    (void)argc, (void)argv, (void)prog;
    printf("topo is not supported yet\n");
    return 3;
}
