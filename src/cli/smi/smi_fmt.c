/*
 * The pure pieces the nvidia-smi printers share (smi.h): the ctime-like timestamp, nvidia-smi's
 * MiB rounding and the -q -d section names. No sampler, no output: the printers and their fuzz
 * target (fuzz/fuzz_smi_print.c) link this file alone.
 */
#include "cli/smi/smi.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* --- small shared helpers ------------------------------------------------------------------- */

void gs_smi_ctime(double t_real, char *buf, size_t n)
{
    time_t secs = (time_t)t_real;
    struct tm tm;

    if (!localtime_r(&secs, &tm) || strftime(buf, n, "%a %b %e %H:%M:%S %Y", &tm) == 0)
        snprintf(buf, n, "N/A");
}

unsigned long long gs_smi_mib(uint64_t bytes)
{
    return bytes / 1048576ULL + (bytes % 1048576ULL != 0);
}

/* Each branch as its nvidia-smi prints: shared/reference/nvidia-smi-captures (590, 595),
 * tests/e2e/smi_xml (the XML of 570, 590, 595) and tests/e2e/smi_610 (610). */
static const struct gs_smi_layout layouts[] = {
    {0, 12, 0, 0, 0},   /* up to 589: nvsmi_device_v12 */
    {590, 13, 0, 0, 0}, /* nvsmi_device_v13 */
    {595, 13, 0, 1, 0},
    {610, 13, 1, 1, 1},
};

int gs_smi_driver_major(const struct gs_snapshot *s)
{
    return s->sys.driver_st == GS_ST_OK ? atoi(s->sys.driver_version) : 0;
}

const struct gs_smi_layout *gs_smi_layout(const struct gs_snapshot *s)
{
    int major = gs_smi_driver_major(s);
    size_t n = sizeof layouts / sizeof layouts[0], i = 0;

    while (i + 1 < n && layouts[i + 1].from <= major)
        i++;
    return &layouts[i];
}

static const struct {
    const char *name;
    unsigned bit;
} sections[] = {
    {"MEMORY", GS_SMI_D_MEMORY},
    {"UTILIZATION", GS_SMI_D_UTILIZATION},
    {"ECC", GS_SMI_D_ECC},
    {"TEMPERATURE", GS_SMI_D_TEMPERATURE},
    {"POWER", GS_SMI_D_POWER},
    {"CLOCK", GS_SMI_D_CLOCK},
    {"COMPUTE", GS_SMI_D_COMPUTE},
    {"PIDS", GS_SMI_D_PIDS},
    {"PERFORMANCE", GS_SMI_D_PERFORMANCE},
    {"SUPPORTED_CLOCKS", GS_SMI_D_SUPPORTED_CLOCKS},
    {"PAGE_RETIREMENT", GS_SMI_D_PAGE_RETIREMENT},
    {"ACCOUNTING", GS_SMI_D_ACCOUNTING},
    {"ENCODER_STATS", GS_SMI_D_ENCODER_STATS},
    {"FBC_STATS", GS_SMI_D_FBC_STATS},
    {"ROW_REMAPPER", GS_SMI_D_ROW_REMAPPER},
    {"VOLTAGE", GS_SMI_D_VOLTAGE},
    {"RESET_STATUS", GS_SMI_D_RESET_STATUS},
};

int gs_smi_parse_sections(const char *spec, unsigned *mask, char *bad, size_t n)
{
    const char *p = spec;

    *mask = 0;
    for (;;) {
        size_t len = strcspn(p, ",");
        size_t k;

        for (k = 0; k < sizeof sections / sizeof sections[0]; k++)
            if (strlen(sections[k].name) == len && strncasecmp(p, sections[k].name, len) == 0)
                break;
        if (k == sizeof sections / sizeof sections[0]) {
            snprintf(bad, n, "%.*s", (int)len, p);
            return -1;
        }
        *mask |= sections[k].bit;
        if (p[len] == '\0')
            return 0;
        p += len + 1;
    }
}
