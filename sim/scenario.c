/*
 * nvml-sim scenario parser: JSON text (jansson) -> struct gs_sim_scenario.
 *
 * jansson reports line and column only for syntax errors, so after a successful parse we walk the
 * text once more in step with the parsed tree and record where each value starts; semantic errors
 * ("gpus[2].power.limit_w: expected a number") then point at file:line:column too. The walk relies
 * on jansson keeping object keys in text order (always true since 2.8) and on duplicate keys being
 * rejected (JSON_REJECT_DUPLICATES).
 *
 * A GPU may name a template ("template": "h100"); a key missing from the GPU is looked up in the
 * template, nested objects are merged key by key and a JSON null removes an inherited value. Every
 * key is checked against the schema, so a typo is an error rather than a silently ignored field.
 * The parser never prints and never trusts the input: lengths, counts and nesting are capped.
 */
#include "scenario.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/nvml_abi.h"

/* ---- tables ------------------------------------------------------------------------------- */

static const struct gs_sim_metric_info metric_info[GS_SIM_M__COUNT] = {
    [GS_SIM_M_UTIL_GPU] = {"util_gpu_pct", 0, 100},
    [GS_SIM_M_UTIL_MEM] = {"util_mem_pct", 0, 100},
    [GS_SIM_M_MEM_USED] = {"mem_used_mib", 0, 1e9},
    [GS_SIM_M_BAR1_USED] = {"bar1_used_mib", 0, 1e9},
    [GS_SIM_M_TEMP] = {"temp_c", 0, 200},
    [GS_SIM_M_MEM_TEMP] = {"mem_temp_c", 0, 200},
    [GS_SIM_M_POWER] = {"power_w", 0, 1e5},
    [GS_SIM_M_POWER_INSTANT] = {"power_instant_w", 0, 1e5},
    [GS_SIM_M_CLK_GRAPHICS] = {"clock_graphics_mhz", 0, 1e5},
    [GS_SIM_M_CLK_SM] = {"clock_sm_mhz", 0, 1e5},
    [GS_SIM_M_CLK_MEM] = {"clock_mem_mhz", 0, 1e5},
    [GS_SIM_M_CLK_VIDEO] = {"clock_video_mhz", 0, 1e5},
    [GS_SIM_M_PCIE_GEN] = {"pcie_gen", 1, 8},
    [GS_SIM_M_PCIE_WIDTH] = {"pcie_width", 1, 32},
    [GS_SIM_M_PCIE_TX] = {"pcie_tx_kb_s", 0, 4e9},
    [GS_SIM_M_PCIE_RX] = {"pcie_rx_kb_s", 0, 4e9},
    [GS_SIM_M_ENC] = {"enc_util_pct", 0, 100},
    [GS_SIM_M_DEC] = {"dec_util_pct", 0, 100},
    [GS_SIM_M_FAN] = {"fan_pct", 0, 200},
    [GS_SIM_M_PSTATE] = {"pstate", 0, 15},
    [GS_SIM_M_GPM_GRAPHICS] = {"gpm_graphics_pct", 0, 100},
    [GS_SIM_M_GPM_SM] = {"gpm_sm_active_pct", 0, 100},
    [GS_SIM_M_GPM_OCCUPANCY] = {"gpm_sm_occupancy_pct", 0, 100},
    [GS_SIM_M_GPM_INTEGER] = {"gpm_integer_pct", 0, 100},
    [GS_SIM_M_GPM_TENSOR] = {"gpm_tensor_pct", 0, 100},
    [GS_SIM_M_GPM_DFMA] = {"gpm_dfma_tensor_pct", 0, 100},
    [GS_SIM_M_GPM_HMMA] = {"gpm_hmma_tensor_pct", 0, 100},
    [GS_SIM_M_GPM_DMMA] = {"gpm_dmma_tensor_pct", 0, 100},
    [GS_SIM_M_GPM_IMMA] = {"gpm_imma_tensor_pct", 0, 100},
    [GS_SIM_M_GPM_DRAM] = {"gpm_dram_bw_pct", 0, 100},
    [GS_SIM_M_GPM_FP64] = {"gpm_fp64_pct", 0, 100},
    [GS_SIM_M_GPM_FP32] = {"gpm_fp32_pct", 0, 100},
    [GS_SIM_M_GPM_FP16] = {"gpm_fp16_pct", 0, 100},
    [GS_SIM_M_GPM_NVDEC] = {"gpm_nvdec_pct", 0, 100},
    [GS_SIM_M_GPM_NVJPG] = {"gpm_nvjpg_pct", 0, 100},
    [GS_SIM_M_GPM_NVOFA] = {"gpm_nvofa_pct", 0, 100},
    [GS_SIM_M_ENC_SESSIONS] = {"enc_sessions", 0, 1e6},
    [GS_SIM_M_ENC_FPS] = {"enc_fps", 0, 1e6},
    [GS_SIM_M_ENC_LATENCY] = {"enc_latency_us", 0, 4e9},
    [GS_SIM_M_JPG] = {"jpg_util_pct", 0, 100},
    [GS_SIM_M_OFA] = {"ofa_util_pct", 0, 100},
    [GS_SIM_M_TEMP_MARGIN] = {"temp_margin_c", -200, 200},
    [GS_SIM_M_NVLINK_TX] = {"nvlink_tx_kib_s", 0, 1e9},
    [GS_SIM_M_NVLINK_RX] = {"nvlink_rx_kib_s", 0, 1e9},
    [GS_SIM_M_FBC_SESSIONS] = {"fbc_sessions", 0, 1e6},
    [GS_SIM_M_FBC_FPS] = {"fbc_fps", 0, 1e6},
    [GS_SIM_M_FBC_LATENCY] = {"fbc_latency_us", 0, 4e9},
    [GS_SIM_M_REPAIR_CHAN] = {"repair_channel_pending", 0, 1},
    [GS_SIM_M_REPAIR_TPC] = {"repair_tpc_pending", 0, 1},
    [GS_SIM_M_POWER_MEM] = {"memory_power_w", 0, 10000},
    [GS_SIM_M_POWER_MEM_I] = {"memory_power_instant_w", 0, 10000},
};

const struct gs_sim_metric_info *gs_sim_metric_info(enum gs_sim_metric m)
{
    return (unsigned)m < GS_SIM_M__COUNT ? &metric_info[m] : NULL;
}

static const char *const fn_names[GS_SIM_FN__COUNT] = {
#define GS_SIM_FN_NAME(name) #name,
    GS_SIM_FUNCTIONS(GS_SIM_FN_NAME)
#undef GS_SIM_FN_NAME
};

const char *gs_sim_fn_name(enum gs_sim_fn fn)
{
    return (unsigned)fn < GS_SIM_FN__COUNT ? fn_names[fn] : "?";
}

static int fn_by_name(const char *name)
{
    for (int i = 0; i < (int)GS_SIM_FN__COUNT; i++)
        if (strcmp(fn_names[i], name) == 0)
            return i;
    return -1;
}

struct name_val {
    const char *name;
    unsigned long long val;
};

static const struct name_val rc_names[] = {
    {"SUCCESS", NVML_SUCCESS},
    {"UNINITIALIZED", NVML_ERROR_UNINITIALIZED},
    {"INVALID_ARGUMENT", NVML_ERROR_INVALID_ARGUMENT},
    {"NOT_SUPPORTED", NVML_ERROR_NOT_SUPPORTED},
    {"NO_PERMISSION", NVML_ERROR_NO_PERMISSION},
    {"ALREADY_INITIALIZED", NVML_ERROR_ALREADY_INITIALIZED},
    {"NOT_FOUND", NVML_ERROR_NOT_FOUND},
    {"INSUFFICIENT_SIZE", NVML_ERROR_INSUFFICIENT_SIZE},
    {"INSUFFICIENT_POWER", NVML_ERROR_INSUFFICIENT_POWER},
    {"DRIVER_NOT_LOADED", NVML_ERROR_DRIVER_NOT_LOADED},
    {"TIMEOUT", NVML_ERROR_TIMEOUT},
    {"IRQ_ISSUE", NVML_ERROR_IRQ_ISSUE},
    {"LIBRARY_NOT_FOUND", NVML_ERROR_LIBRARY_NOT_FOUND},
    {"FUNCTION_NOT_FOUND", NVML_ERROR_FUNCTION_NOT_FOUND},
    {"CORRUPTED_INFOROM", NVML_ERROR_CORRUPTED_INFOROM},
    {"GPU_IS_LOST", NVML_ERROR_GPU_IS_LOST},
    {"RESET_REQUIRED", NVML_ERROR_RESET_REQUIRED},
    {"OPERATING_SYSTEM", NVML_ERROR_OPERATING_SYSTEM},
    {"LIB_RM_VERSION_MISMATCH", NVML_ERROR_LIB_RM_VERSION_MISMATCH},
    {"IN_USE", NVML_ERROR_IN_USE},
    {"MEMORY", NVML_ERROR_MEMORY},
    {"NO_DATA", NVML_ERROR_NO_DATA},
    {"VGPU_ECC_NOT_SUPPORTED", NVML_ERROR_VGPU_ECC_NOT_SUPPORTED},
    {"INSUFFICIENT_RESOURCES", NVML_ERROR_INSUFFICIENT_RESOURCES},
    {"FREQ_NOT_SUPPORTED", NVML_ERROR_FREQ_NOT_SUPPORTED},
    {"ARGUMENT_VERSION_MISMATCH", NVML_ERROR_ARGUMENT_VERSION_MISMATCH},
    {"DEPRECATED", NVML_ERROR_DEPRECATED},
    {"NOT_READY", NVML_ERROR_NOT_READY},
    {"GPU_NOT_FOUND", NVML_ERROR_GPU_NOT_FOUND},
    {"INVALID_STATE", NVML_ERROR_INVALID_STATE},
    {"UNKNOWN", NVML_ERROR_UNKNOWN},
    {NULL, 0},
};

static const struct name_val arch_names[] = {
    {"kepler", NVML_DEVICE_ARCH_KEPLER},
    {"maxwell", NVML_DEVICE_ARCH_MAXWELL},
    {"pascal", NVML_DEVICE_ARCH_PASCAL},
    {"volta", NVML_DEVICE_ARCH_VOLTA},
    {"turing", NVML_DEVICE_ARCH_TURING},
    {"ampere", NVML_DEVICE_ARCH_AMPERE},
    {"ada", NVML_DEVICE_ARCH_ADA},
    {"hopper", NVML_DEVICE_ARCH_HOPPER},
    {"blackwell", NVML_DEVICE_ARCH_BLACKWELL},
    {"rubin", NVML_DEVICE_ARCH_RUBIN},
    {"unknown", NVML_DEVICE_ARCH_UNKNOWN},
    {NULL, 0},
};

static const struct name_val brand_names[] = {
    {"unknown", 0},     {"quadro", 1},      {"tesla", 2},       {"nvs", 3},
    {"grid", 4},        {"geforce", 5},     {"titan", 6},       {"nvidia_vapps", 7},
    {"nvidia_vpc", 8},  {"nvidia_vcs", 9},  {"nvidia_vws", 10}, {"nvidia_cloud_gaming", 11},
    {"quadro_rtx", 12}, {"nvidia_rtx", 13}, {"nvidia", 14},     {"geforce_rtx", 15},
    {"titan_rtx", 16},  {NULL, 0},
};

static const struct name_val compute_mode_names[] = {
    {"default", NVML_COMPUTEMODE_DEFAULT},
    {"exclusive_thread", NVML_COMPUTEMODE_EXCLUSIVE_THREAD},
    {"prohibited", NVML_COMPUTEMODE_PROHIBITED},
    {"exclusive_process", NVML_COMPUTEMODE_EXCLUSIVE_PROCESS},
    {NULL, 0},
};

static const struct name_val reason_names[] = {
    {"gpu_idle", nvmlClocksEventReasonGpuIdle},
    {"applications_clocks_setting", nvmlClocksEventReasonApplicationsClocksSetting},
    {"sw_power_cap", nvmlClocksEventReasonSwPowerCap},
    {"hw_slowdown", nvmlClocksEventReasonHwSlowdown},
    {"sync_boost", nvmlClocksEventReasonSyncBoost},
    {"sw_thermal_slowdown", nvmlClocksEventReasonSwThermalSlowdown},
    {"hw_thermal_slowdown", nvmlClocksEventReasonHwThermalSlowdown},
    {"hw_power_brake_slowdown", nvmlClocksEventReasonHwPowerBrakeSlowdown},
    {"display_clock_setting", nvmlClocksEventReasonDisplayClockSetting},
    {NULL, 0},
};

static const struct name_val location_names[] = {
    {"l1_cache", 0},    {"l2_cache", 1},      {"device_memory", 2},
    {"dram", 2},        {"register_file", 3}, {"texture_memory", 4},
    {"texture_shm", 5}, {"cbu", 6},           {"sram", 7},
    {NULL, 0},
};

static const struct name_val threshold_names[] = {
    {"shutdown", 0},      {"slowdown", 1},     {"mem_max", 2},  {"gpu_max", 3}, {"acoustic_min", 4},
    {"acoustic_curr", 5}, {"acoustic_max", 6}, {"gps_curr", 7}, {NULL, 0},
};

static const struct name_val proc_type_names[] = {
    {"compute", GS_SIM_PROC_COMPUTE},
    {"graphics", GS_SIM_PROC_GRAPHICS},
    {"both", GS_SIM_PROC_COMPUTE | GS_SIM_PROC_GRAPHICS},
    {"mps", GS_SIM_PROC_MPS},
    {NULL, 0},
};

static const struct name_val addressing_names[] = {
    {"none", NVML_DEVICE_ADDRESSING_MODE_NONE},
    {"hmm", NVML_DEVICE_ADDRESSING_MODE_HMM},
    {"ats", NVML_DEVICE_ADDRESSING_MODE_ATS},
    {NULL, 0},
};

static const struct name_val virt_names[] = {
    {"none", NVML_GPU_VIRTUALIZATION_MODE_NONE},
    {"pass-through", NVML_GPU_VIRTUALIZATION_MODE_PASSTHROUGH},
    {"vgpu", NVML_GPU_VIRTUALIZATION_MODE_VGPU},
    {"host-vgpu", NVML_GPU_VIRTUALIZATION_MODE_HOST_VGPU},
    {"host-vsga", NVML_GPU_VIRTUALIZATION_MODE_HOST_VSGA},
    {NULL, 0},
};

static const struct name_val host_vgpu_names[] = {
    {"non-sr-iov", NVML_HOST_VGPU_MODE_NON_SRIOV},
    {"sr-iov", NVML_HOST_VGPU_MODE_SRIOV},
    {NULL, 0},
};

static const struct name_val recovery_names[] = {
    {"none", NVML_GPU_RECOVERY_ACTION_NONE},
    {"gpu-reset", NVML_GPU_RECOVERY_ACTION_GPU_RESET},
    {"node-reboot", NVML_GPU_RECOVERY_ACTION_NODE_REBOOT},
    {"drain-p2p", NVML_GPU_RECOVERY_ACTION_DRAIN_P2P},
    {"drain-and-reset", NVML_GPU_RECOVERY_ACTION_DRAIN_AND_RESET},
    {NULL, 0},
};

static const struct name_val fabric_health_names[] = {
    {"not-supported", NVML_GPU_FABRIC_HEALTH_SUMMARY_NOT_SUPPORTED},
    {"healthy", NVML_GPU_FABRIC_HEALTH_SUMMARY_HEALTHY},
    {"unhealthy", NVML_GPU_FABRIC_HEALTH_SUMMARY_UNHEALTHY},
    {"limited-capacity", NVML_GPU_FABRIC_HEALTH_SUMMARY_LIMITED_CAPACITY},
    {NULL, 0},
};

static const struct name_val fabric_state_names[] = {
    {"not-started", NVML_GPU_FABRIC_STATE_NOT_STARTED},
    {"in-progress", NVML_GPU_FABRIC_STATE_IN_PROGRESS},
    {"completed", NVML_GPU_FABRIC_STATE_COMPLETED},
    {NULL, 0},
};

static const struct name_val event_names[] = {
    {"xid", GS_SIM_EV_XID},
    {"gpu_lost", GS_SIM_EV_GPU_LOST},
    {"throttle_on", GS_SIM_EV_THROTTLE_ON},
    {"throttle_off", GS_SIM_EV_THROTTLE_OFF},
    {"mig_enable", GS_SIM_EV_MIG_ENABLE},
    {"mig_disable", GS_SIM_EV_MIG_DISABLE},
    {"ecc_error", GS_SIM_EV_ECC_ERROR},
    {"process_start", GS_SIM_EV_PROCESS_START},
    {"process_exit", GS_SIM_EV_PROCESS_EXIT},
    {"nvlink_down", GS_SIM_EV_NVLINK_DOWN},
    {"nvlink_up", GS_SIM_EV_NVLINK_UP},
    {NULL, 0},
};

static const struct name_val ecc_type_names[] = {
    {"corrected", NVML_MEMORY_ERROR_TYPE_CORRECTED},
    {"uncorrected", NVML_MEMORY_ERROR_TYPE_UNCORRECTED},
    {NULL, 0},
};

static const struct name_val sample_type_names[] = {
    {"total_power", 0},        {"gpu_utilization", 1},
    {"memory_utilization", 2}, {"enc_utilization", 3},
    {"dec_utilization", 4},    {"processor_clk", 5},
    {"memory_clk", 6},         {NULL, 0},
};

static int lookup_name(const struct name_val *tab, const char *name, unsigned long long *out)
{
    for (; tab->name; tab++) {
        if (strcasecmp(tab->name, name) == 0) {
            *out = tab->val;
            return 0;
        }
    }
    return -1;
}

int gs_sim_rc_by_name(const char *name)
{
    unsigned long long v;

    if (strncasecmp(name, "NVML_ERROR_", 11) == 0)
        name += 11;
    else if (strcasecmp(name, "NVML_SUCCESS") == 0)
        name = "SUCCESS";
    if (lookup_name(rc_names, name, &v) != 0)
        return -1;
    return (int)v;
}

/* ---- arena -------------------------------------------------------------------------------- */

struct gs_sim_arena {
    struct gs_sim_arena *next;
    max_align_t mem[];
};

static void *arena_alloc(struct gs_sim_scenario *sc, size_t n)
{
    struct gs_sim_arena *a;

    if (n > GS_SIM_MAX_SCENARIO_BYTES * 8u)
        return NULL;
    a = calloc(1, sizeof *a + n);
    if (!a)
        return NULL;
    a->next = sc->arena;
    sc->arena = a;
    return a->mem;
}

void gs_sim_scenario_free(struct gs_sim_scenario *sc)
{
    struct gs_sim_arena *a, *next;

    if (!sc)
        return;
    for (a = sc->arena; a; a = next) {
        next = a->next;
        free(a);
    }
    free(sc);
}

/* ---- positions of values in the text ------------------------------------------------------ */

struct pos {
    const json_t *v;
    unsigned line, col;
};

struct parse {
    const char *origin;
    const char *text;
    size_t len;
    struct pos *pos;
    size_t n_pos, cap_pos;
    bool pos_ok;
    char *err;
    size_t err_len;
    struct gs_sim_scenario *sc;
    const json_t *templates;
};

struct cursor {
    const char *s;
    size_t len, i;
    unsigned line, col;
};

static void cur_adv(struct cursor *c)
{
    unsigned char ch = (unsigned char)c->s[c->i];

    if (ch == '\n') {
        c->line++;
        c->col = 1;
    } else if ((ch & 0xC0) != 0x80) { /* count characters, not UTF-8 continuation bytes */
        c->col++;
    }
    c->i++;
}

static void cur_ws(struct cursor *c)
{
    while (c->i < c->len && strchr(" \t\r\n", c->s[c->i]) && c->s[c->i] != '\0')
        cur_adv(c);
}

static bool cur_string(struct cursor *c)
{
    if (c->i >= c->len || c->s[c->i] != '"')
        return false;
    cur_adv(c);
    while (c->i < c->len) {
        char ch = c->s[c->i];
        cur_adv(c);
        if (ch == '\\') {
            if (c->i < c->len)
                cur_adv(c);
        } else if (ch == '"') {
            return true;
        }
    }
    return false;
}

static void cur_scalar(struct cursor *c)
{
    while (c->i < c->len && !strchr(",]}: \t\r\n", c->s[c->i]) && c->s[c->i] != '\0')
        cur_adv(c);
}

static bool pos_record(struct parse *ps, const json_t *v, unsigned line, unsigned col)
{
    /* true/false/null are shared singletons in jansson: their position is meaningless. */
    if (json_is_true(v) || json_is_false(v) || json_is_null(v))
        return true;
    if (ps->n_pos == ps->cap_pos) {
        size_t cap = ps->cap_pos ? ps->cap_pos * 2 : 256;
        struct pos *p = realloc(ps->pos, cap * sizeof *p);
        if (!p)
            return false;
        ps->pos = p;
        ps->cap_pos = cap;
    }
    ps->pos[ps->n_pos++] = (struct pos){v, line, col};
    return true;
}

static bool walk(struct parse *ps, struct cursor *c, const json_t *v, unsigned depth)
{
    if (depth > GS_SIM_MAX_NESTING)
        return false;
    cur_ws(c);
    if (c->i >= c->len || !pos_record(ps, v, c->line, c->col))
        return false;
    if (json_is_object(v)) {
        void *it = json_object_iter((json_t *)v);
        if (c->s[c->i] != '{')
            return false;
        cur_adv(c);
        cur_ws(c);
        if (c->i < c->len && c->s[c->i] == '}') {
            cur_adv(c);
            return it == NULL;
        }
        for (; it; it = json_object_iter_next((json_t *)v, it)) {
            cur_ws(c);
            if (!cur_string(c))
                return false;
            cur_ws(c);
            if (c->i >= c->len || c->s[c->i] != ':')
                return false;
            cur_adv(c);
            if (!walk(ps, c, json_object_iter_value(it), depth + 1))
                return false;
            cur_ws(c);
            if (c->i >= c->len)
                return false;
            if (c->s[c->i] == '}') {
                cur_adv(c);
                return json_object_iter_next((json_t *)v, it) == NULL;
            }
            if (c->s[c->i] != ',')
                return false;
            cur_adv(c);
        }
        return false;
    }
    if (json_is_array(v)) {
        size_t n = json_array_size(v);
        if (c->s[c->i] != '[')
            return false;
        cur_adv(c);
        cur_ws(c);
        if (c->i < c->len && c->s[c->i] == ']') {
            cur_adv(c);
            return n == 0;
        }
        for (size_t k = 0; k < n; k++) {
            if (!walk(ps, c, json_array_get(v, k), depth + 1))
                return false;
            cur_ws(c);
            if (c->i >= c->len)
                return false;
            if (c->s[c->i] == ']') {
                cur_adv(c);
                return k + 1 == n;
            }
            if (c->s[c->i] != ',')
                return false;
            cur_adv(c);
        }
        return false;
    }
    if (json_is_string(v))
        return cur_string(c);
    cur_scalar(c);
    return true;
}

static int pos_cmp(const void *a, const void *b)
{
    const json_t *x = ((const struct pos *)a)->v, *y = ((const struct pos *)b)->v;
    return x < y ? -1 : x > y;
}

static const struct pos *pos_find(const struct parse *ps, const json_t *v)
{
    struct pos key = {v, 0, 0};

    if (!ps->pos_ok || !v)
        return NULL;
    return bsearch(&key, ps->pos, ps->n_pos, sizeof key, pos_cmp);
}

/* The deepest nesting of brackets outside strings; the tree walk above recurses that deep. */
static unsigned text_depth(const char *s, size_t len, size_t *where)
{
    unsigned depth = 0, max = 0;
    bool in_str = false;

    for (size_t i = 0; i < len; i++) {
        char ch = s[i];
        if (in_str) {
            if (ch == '\\')
                i++;
            else if (ch == '"')
                in_str = false;
        } else if (ch == '"') {
            in_str = true;
        } else if (ch == '{' || ch == '[') {
            if (++depth > max) {
                max = depth;
                *where = i;
            }
        } else if ((ch == '}' || ch == ']') && depth > 0) {
            depth--;
        }
    }
    return max;
}

/* ---- errors ------------------------------------------------------------------------------- */

/* Reports "origin:line:col: path: message" at v (or at fallback when v has no position). */
static int perr(struct parse *ps, const json_t *v, const json_t *fallback, const char *path,
                const char *fmt, ...)
{
    const struct pos *p = pos_find(ps, v);
    char msg[320];
    va_list ap;

    if (!p)
        p = pos_find(ps, fallback);
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (p)
        snprintf(ps->err, ps->err_len, "%s:%u:%u: %s%s%s", ps->origin, p->line, p->col,
                 path ? path : "", path && *path ? ": " : "", msg);
    else
        snprintf(ps->err, ps->err_len, "%s: %s%s%s", ps->origin, path ? path : "",
                 path && *path ? ": " : "", msg);
    return -1;
}

/* ---- objects with an inheritance chain ----------------------------------------------------- */

struct jobj {
    const json_t *o[2]; /* the object, then its template's counterpart */
    unsigned n;
    char path[192];
};

/* Appends src to dst (capacity cap), truncating; paths only decorate messages. */
static void str_append(char *dst, size_t cap, const char *src)
{
    size_t used = strlen(dst), n = strlen(src);

    if (used + 1 >= cap)
        return;
    if (n > cap - used - 1)
        n = cap - used - 1;
    memcpy(dst + used, src, n);
    dst[used + n] = '\0';
}

static void path_join(char *out, size_t cap, const char *base, const char *key)
{
    out[0] = '\0';
    str_append(out, cap, base);
    if (*base)
        str_append(out, cap, ".");
    str_append(out, cap, key);
}

static void jobj_one(struct jobj *ob, const json_t *o, const char *path)
{
    ob->o[0] = o;
    ob->n = 1;
    ob->path[0] = '\0';
    str_append(ob->path, sizeof ob->path, path);
}

/* The value for key along the chain: the first object that has the key wins; a JSON null there
 * means "explicitly absent" and yields NULL. *where gets the object it came from. */
static const json_t *jget(const struct jobj *ob, const char *key, const json_t **where)
{
    for (unsigned i = 0; i < ob->n; i++) {
        const json_t *v = json_object_get(ob->o[i], key);
        if (v) {
            if (where)
                *where = ob->o[i];
            return json_is_null(v) ? NULL : v;
        }
    }
    if (where)
        *where = ob->n ? ob->o[0] : NULL;
    return NULL;
}

static int check_keys(struct parse *ps, const struct jobj *ob, const char *const *allowed)
{
    for (unsigned i = 0; i < ob->n; i++) {
        const char *key;
        json_t *v;
        json_object_foreach((json_t *)ob->o[i], key, v)
        {
            const char *const *a;
            for (a = allowed; *a; a++)
                if (strcmp(*a, key) == 0)
                    break;
            if (!*a)
                return perr(ps, v, ob->o[i], ob->path, "unknown key \"%.64s\"", key);
        }
    }
    return 0;
}

static int get_child(struct parse *ps, const struct jobj *ob, const char *key, struct jobj *child,
                     bool *present)
{
    child->n = 0;
    path_join(child->path, sizeof child->path, ob->path, key);
    for (unsigned i = 0; i < ob->n; i++) {
        const json_t *v = json_object_get(ob->o[i], key);
        if (!v)
            continue;
        if (json_is_null(v))
            break;
        if (!json_is_object(v))
            return perr(ps, v, ob->o[i], child->path, "expected an object");
        child->o[child->n++] = v;
    }
    *present = child->n > 0;
    return 0;
}

static int get_num(struct parse *ps, const struct jobj *ob, const char *key, double lo, double hi,
                   double *out, bool *present)
{
    const json_t *where;
    const json_t *v = jget(ob, key, &where);
    char path[256];
    double d;

    *present = false;
    if (!v)
        return 0;
    path_join(path, sizeof path, ob->path, key);
    if (!json_is_number(v))
        return perr(ps, v, where, path, "expected a number");
    d = json_number_value(v);
    if (!(d >= lo && d <= hi))
        return perr(ps, v, where, path, "%g is out of range [%g, %g]", d, lo, hi);
    *out = d;
    *present = true;
    return 0;
}

/* An unsigned integer given as a JSON integer or as a string ("0x2330", "17"). */
static int to_uint(struct parse *ps, const json_t *v, const json_t *where, const char *path,
                   unsigned long long lo, unsigned long long hi, unsigned long long *out)
{
    unsigned long long u;

    if (json_is_integer(v)) {
        json_int_t i = json_integer_value(v);
        if (i < 0)
            return perr(ps, v, where, path, "expected a non-negative integer");
        u = (unsigned long long)i;
    } else if (json_is_real(v)) {
        double d = json_real_value(v);
        if (!(d >= 0 && d <= 1.8e19) || d != floor(d))
            return perr(ps, v, where, path, "expected a non-negative integer");
        u = (unsigned long long)d;
    } else if (json_is_string(v)) {
        const char *s = json_string_value(v);
        char *end = NULL;
        if (!*s || *s == '-' || isspace((unsigned char)*s))
            return perr(ps, v, where, path, "expected an integer");
        errno = 0;
        u = strtoull(s, &end, 0);
        if (errno || *end)
            return perr(ps, v, where, path, "\"%.40s\" is not an integer", s);
    } else {
        return perr(ps, v, where, path, "expected an integer");
    }
    if (u < lo || u > hi)
        return perr(ps, v, where, path, "%llu is out of range [%llu, %llu]", u, lo, hi);
    *out = u;
    return 0;
}

static int get_uint(struct parse *ps, const struct jobj *ob, const char *key, unsigned long long lo,
                    unsigned long long hi, unsigned long long *out, bool *present)
{
    const json_t *where;
    const json_t *v = jget(ob, key, &where);
    char path[256];

    *present = false;
    if (!v)
        return 0;
    path_join(path, sizeof path, ob->path, key);
    if (to_uint(ps, v, where, path, lo, hi, out) != 0)
        return -1;
    *present = true;
    return 0;
}

static int get_u32(struct parse *ps, const struct jobj *ob, const char *key, unsigned lo,
                   unsigned hi, unsigned *out)
{
    unsigned long long u;
    bool present;

    if (get_uint(ps, ob, key, lo, hi, &u, &present) != 0)
        return -1;
    if (present)
        *out = (unsigned)u;
    return 0;
}

static int get_str(struct parse *ps, const struct jobj *ob, const char *key, char *buf, size_t cap,
                   bool *present)
{
    const json_t *where;
    const json_t *v = jget(ob, key, &where);
    char path[256];
    size_t n;

    *present = false;
    if (!v)
        return 0;
    path_join(path, sizeof path, ob->path, key);
    if (!json_is_string(v))
        return perr(ps, v, where, path, "expected a string");
    n = json_string_length(v);
    if (n >= cap)
        return perr(ps, v, where, path, "string longer than %zu bytes", cap - 1);
    if (memchr(json_string_value(v), '\0', n))
        return perr(ps, v, where, path, "string contains a NUL byte");
    memcpy(buf, json_string_value(v), n + 1);
    *present = true;
    return 0;
}

static int get_bool(struct parse *ps, const struct jobj *ob, const char *key, bool *out)
{
    const json_t *where;
    const json_t *v = jget(ob, key, &where);
    char path[256];

    if (!v)
        return 0;
    path_join(path, sizeof path, ob->path, key);
    if (!json_is_boolean(v))
        return perr(ps, v, where, path, "expected true or false");
    *out = json_is_true(v);
    return 0;
}

/* A name from tab (case-insensitive) or, when numbers_ok, a number. */
static int to_enum(struct parse *ps, const json_t *v, const json_t *where, const char *path,
                   const struct name_val *tab, bool numbers_ok, unsigned long long *out)
{
    if (json_is_string(v)) {
        if (lookup_name(tab, json_string_value(v), out) == 0)
            return 0;
        return perr(ps, v, where, path, "unknown value \"%.64s\"", json_string_value(v));
    }
    if (numbers_ok && (json_is_integer(v) || json_is_real(v)))
        return to_uint(ps, v, where, path, 0, 0xFFFFFFFFull, out);
    return perr(ps, v, where, path,
                numbers_ok ? "expected a name or a number"
                           : "expected one of the documented names");
}

static int get_enum(struct parse *ps, const struct jobj *ob, const char *key,
                    const struct name_val *tab, bool numbers_ok, unsigned *out, bool *present)
{
    const json_t *where;
    const json_t *v = jget(ob, key, &where);
    char path[256];
    unsigned long long u;

    *present = false;
    if (!v)
        return 0;
    path_join(path, sizeof path, ob->path, key);
    if (to_enum(ps, v, where, path, tab, numbers_ok, &u) != 0)
        return -1;
    *out = (unsigned)u;
    *present = true;
    return 0;
}

/* A size given as "<key>_mib" (a number, may be fractional) or "<key>_bytes" (an integer). */
static int get_size(struct parse *ps, const struct jobj *ob, const char *key, uint64_t *out,
                    bool *present)
{
    char k_mib[64], k_bytes[64];
    double mib;
    unsigned long long bytes;
    bool p_mib, p_bytes;

    snprintf(k_mib, sizeof k_mib, "%s_mib", key);
    snprintf(k_bytes, sizeof k_bytes, "%s_bytes", key);
    if (get_num(ps, ob, k_mib, 0, 1e9, &mib, &p_mib) != 0 ||
        get_uint(ps, ob, k_bytes, 0, 1ull << 60, &bytes, &p_bytes) != 0)
        return -1;
    if (p_mib && p_bytes)
        return perr(ps, jget(ob, k_bytes, NULL), ob->o[0], ob->path, "give %s or %s, not both",
                    k_mib, k_bytes);
    *present = p_mib || p_bytes;
    if (p_mib)
        *out = (uint64_t)llround(mib * 1048576.0);
    else if (p_bytes)
        *out = bytes;
    return 0;
}

/* ---- patterns ----------------------------------------------------------------------------- */

static int parse_noise(struct parse *ps, const struct jobj *ob, struct gs_sim_pattern *p)
{
    static const char *const keys[] = {"amplitude", "seed", "period_s", NULL};
    unsigned long long seed = 0;
    bool present;

    if (check_keys(ps, ob, keys) != 0 ||
        get_num(ps, ob, "amplitude", 0, 1e12, &p->noise_amp, &present) != 0)
        return -1;
    if (!present)
        return perr(ps, ob->o[0], NULL, ob->path, "missing \"amplitude\"");
    if (get_uint(ps, ob, "seed", 0, UINT64_MAX, &seed, &present) != 0 ||
        get_num(ps, ob, "period_s", 1e-3, 1e9, &p->noise_period_s, &present) != 0)
        return -1;
    p->noise_seed = seed;
    return 0;
}

static int parse_points(struct parse *ps, const json_t *arr, const json_t *where, const char *path,
                        struct gs_sim_pattern *p)
{
    size_t n = json_array_size(arr);
    double *tv, *vv;

    if (!json_is_array(arr) || n == 0)
        return perr(ps, arr, where, path, "expected a non-empty array of [t_s, value] pairs");
    if (n > 1024)
        return perr(ps, arr, where, path, "more than 1024 points");
    tv = arena_alloc(ps->sc, n * sizeof *tv);
    vv = arena_alloc(ps->sc, n * sizeof *vv);
    if (!tv || !vv)
        return perr(ps, arr, where, path, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const json_t *pt = json_array_get(arr, i);
        const json_t *a = json_array_get(pt, 0), *b = json_array_get(pt, 1);
        if (!json_is_array(pt) || json_array_size(pt) != 2 || !json_is_number(a) ||
            !json_is_number(b))
            return perr(ps, pt, arr, path, "point %zu: expected [t_s, value]", i);
        tv[i] = json_number_value(a);
        vv[i] = json_number_value(b);
        if (!(fabs(tv[i]) <= 1e12) || !(fabs(vv[i]) <= 1e15))
            return perr(ps, pt, arr, path, "point %zu: value out of range", i);
        if (i > 0 && tv[i] < tv[i - 1])
            return perr(ps, pt, arr, path, "point %zu: times must not decrease", i);
    }
    p->pt_t = tv;
    p->pt_v = vv;
    p->n_points = (unsigned)n;
    return 0;
}

static int parse_pattern(struct parse *ps, const json_t *v, const json_t *where, const char *path,
                         struct gs_sim_pattern *p)
{
    static const char *const keys[] = {"constant", "square", "ramp", "points", "period_s",
                                       "noise",    "min",    "max",  NULL};
    struct jobj ob, sub;
    unsigned shapes = 0;
    bool present;

    *p = gs_sim_pattern_const(0);
    if (json_is_number(v)) {
        p->value = json_number_value(v);
        if (!(fabs(p->value) <= 1e15))
            return perr(ps, v, where, path, "value out of range");
        return 0;
    }
    if (!json_is_object(v))
        return perr(ps, v, where, path, "expected a number or a pattern object");
    jobj_one(&ob, v, path);
    if (check_keys(ps, &ob, keys) != 0)
        return -1;
    if (get_num(ps, &ob, "constant", -1e15, 1e15, &p->value, &present) != 0)
        return -1;
    shapes += present;
    if (get_child(ps, &ob, "square", &sub, &present) != 0)
        return -1;
    if (present) {
        static const char *const sq[] = {"period_s", "duty", "high", "low", "phase_s", NULL};
        bool pp, pd, ph, pl, pph;
        shapes++;
        p->kind = GS_SIM_PAT_SQUARE;
        if (check_keys(ps, &sub, sq) != 0 ||
            get_num(ps, &sub, "period_s", 1e-3, 1e9, &p->period_s, &pp) != 0 ||
            get_num(ps, &sub, "duty", 0, 1, &p->duty, &pd) != 0 ||
            get_num(ps, &sub, "high", -1e15, 1e15, &p->high, &ph) != 0 ||
            get_num(ps, &sub, "low", -1e15, 1e15, &p->low, &pl) != 0 ||
            get_num(ps, &sub, "phase_s", -1e9, 1e9, &p->phase_s, &pph) != 0)
            return -1;
        if (!pp || !pd || !ph || !pl)
            return perr(ps, sub.o[0], NULL, sub.path,
                        "a square wave needs period_s, duty, high and low");
    }
    if (get_child(ps, &ob, "ramp", &sub, &present) != 0)
        return -1;
    if (present) {
        static const char *const rk[] = {"from", "to", "start_s", "duration_s", NULL};
        bool pf, pt, ps_, pd;
        shapes++;
        p->kind = GS_SIM_PAT_RAMP;
        if (check_keys(ps, &sub, rk) != 0 ||
            get_num(ps, &sub, "from", -1e15, 1e15, &p->from, &pf) != 0 ||
            get_num(ps, &sub, "to", -1e15, 1e15, &p->to, &pt) != 0 ||
            get_num(ps, &sub, "start_s", -1e9, 1e9, &p->start_s, &ps_) != 0 ||
            get_num(ps, &sub, "duration_s", 0, 1e9, &p->duration_s, &pd) != 0)
            return -1;
        if (!pf || !pt || !pd)
            return perr(ps, sub.o[0], NULL, sub.path, "a ramp needs from, to and duration_s");
    }
    {
        const json_t *pts = json_object_get(v, "points");
        double per;
        if (pts) {
            char ppath[256];
            shapes++;
            p->kind = GS_SIM_PAT_POINTS;
            path_join(ppath, sizeof ppath, path, "points");
            if (parse_points(ps, pts, v, ppath, p) != 0)
                return -1;
        }
        if (get_num(ps, &ob, "period_s", 1e-3, 1e9, &per, &present) != 0)
            return -1;
        if (present) {
            if (!pts)
                return perr(ps, json_object_get(v, "period_s"), v, path,
                            "period_s belongs to a points pattern");
            if (p->pt_t[0] != 0 || p->pt_t[p->n_points - 1] > per)
                return perr(ps, pts, v, path,
                            "periodic points must start at t=0 and end by period_s");
            p->points_period_s = per;
        }
    }
    if (shapes != 1)
        return perr(ps, v, where, path,
                    "a pattern needs exactly one of constant, square, ramp, points");
    if (get_child(ps, &ob, "noise", &sub, &present) != 0 ||
        (present && parse_noise(ps, &sub, p) != 0))
        return -1;
    if (get_num(ps, &ob, "min", -1e15, 1e15, &p->min, &p->has_min) != 0 ||
        get_num(ps, &ob, "max", -1e15, 1e15, &p->max, &p->has_max) != 0)
        return -1;
    return 0;
}

/* Parses every metric key present in ob into metric[]/given[]. */
static int parse_metrics(struct parse *ps, const struct jobj *ob, struct gs_sim_pattern *metric,
                         bool *given)
{
    const char *keys[GS_SIM_M__COUNT + 1];

    for (unsigned m = 0; m < GS_SIM_M__COUNT; m++)
        keys[m] = metric_info[m].key;
    keys[GS_SIM_M__COUNT] = NULL;
    if (check_keys(ps, ob, keys) != 0)
        return -1;
    for (unsigned m = 0; m < GS_SIM_M__COUNT; m++) {
        const json_t *where;
        const json_t *v = jget(ob, metric_info[m].key, &where);
        char path[256];
        if (!v)
            continue;
        path_join(path, sizeof path, ob->path, metric_info[m].key);
        if (parse_pattern(ps, v, where, path, &metric[m]) != 0)
            return -1;
        given[m] = true;
    }
    return 0;
}

/* ---- overrides ---------------------------------------------------------------------------- */

static int add_override(struct parse *ps, const json_t *v, const json_t *where, const char *path,
                        struct gs_sim_override *ov, unsigned *n, const char *fn, int rc)
{
    int id = fn_by_name(fn);

    if (id < 0)
        return perr(ps, v, where, path, "\"%.64s\" is not an NVML function the sim implements", fn);
    if (*n >= GS_SIM_MAX_OVERRIDES)
        return perr(ps, v, where, path, "more than %u overrides", GS_SIM_MAX_OVERRIDES);
    ov[*n].fn = (enum gs_sim_fn)id;
    ov[*n].rc = rc;
    (*n)++;
    return 0;
}

/* "errors": {"nvmlX": "CODE"} and "not_supported": ["nvmlX", "field:82", "gpm:5",
 * "samples:gpu_utilization"]; gpu may be NULL for the top level (no field/gpm/samples forms). */
static int parse_overrides(struct parse *ps, const struct jobj *ob, struct gs_sim_override *ov,
                           unsigned *n, struct gs_sim_gpu *gpu)
{
    const json_t *where;
    const json_t *errs = jget(ob, "errors", &where);
    const json_t *ns;
    char path[256];

    if (errs) {
        const char *key;
        json_t *v;
        path_join(path, sizeof path, ob->path, "errors");
        if (!json_is_object(errs))
            return perr(ps, errs, where, path, "expected an object of function: error");
        json_object_foreach((json_t *)errs, key, v)
        {
            int rc = json_is_string(v) ? gs_sim_rc_by_name(json_string_value(v)) : -1;
            if (json_is_integer(v) && json_integer_value(v) >= 0 && json_integer_value(v) <= 999)
                rc = (int)json_integer_value(v);
            if (rc < 0)
                return perr(ps, v, errs, path, "%.64s: expected an NVML error name", key);
            if (add_override(ps, v, errs, path, ov, n, key, rc) != 0)
                return -1;
        }
    }
    ns = jget(ob, "not_supported", &where);
    if (!ns)
        return 0;
    path_join(path, sizeof path, ob->path, "not_supported");
    if (!json_is_array(ns))
        return perr(ps, ns, where, path, "expected an array of names");
    for (size_t i = 0; i < json_array_size(ns); i++) {
        const json_t *v = json_array_get(ns, i);
        const char *s = json_string_value(v);
        unsigned long long u;
        if (!s)
            return perr(ps, v, ns, path, "expected a string");
        if (gpu && strncmp(s, "field:", 6) == 0) {
            char *end;
            errno = 0;
            u = strtoull(s + 6, &end, 10);
            if (errno || *end || s[6] == '\0' || u > 100000)
                return perr(ps, v, ns, path, "bad field id in \"%.64s\"", s);
            if (gpu->n_unsupported_fields >= GS_SIM_MAX_OVERRIDES)
                return perr(ps, v, ns, path, "too many entries");
            gpu->unsupported_fields[gpu->n_unsupported_fields++] = (unsigned)u;
        } else if (gpu && strncmp(s, "gpm:", 4) == 0) {
            char *end;
            errno = 0;
            u = strtoull(s + 4, &end, 10);
            if (errno || *end || s[4] == '\0' || u > 100000)
                return perr(ps, v, ns, path, "bad GPM metric id in \"%.64s\"", s);
            if (gpu->n_unsupported_gpm >= GS_SIM_MAX_OVERRIDES)
                return perr(ps, v, ns, path, "too many entries");
            gpu->unsupported_gpm[gpu->n_unsupported_gpm++] = (unsigned)u;
        } else if (gpu && strncmp(s, "samples:", 8) == 0) {
            if (lookup_name(sample_type_names, s + 8, &u) != 0)
                return perr(ps, v, ns, path, "unknown sample type in \"%.64s\"", s);
            gpu->unsupported_samples |= 1u << u;
        } else if (add_override(ps, v, ns, path, ov, n, s, NVML_ERROR_NOT_SUPPORTED) != 0) {
            return -1;
        }
    }
    return 0;
}

/* ---- GPUs --------------------------------------------------------------------------------- */

static int parse_pci(struct parse *ps, const struct jobj *gob, struct gs_sim_gpu *g)
{
    static const char *const keys[] = {"domain",     "bus",          "device",
                                       "device_id",  "subsystem_id", "bus_id",
                                       "base_class", "sub_class",    NULL};
    struct jobj ob;
    unsigned long long u, cls[2] = {0, 0};
    bool present, has_bus_id, has_cls[2] = {false, false};

    if (get_child(ps, gob, "pci", &ob, &present) != 0)
        return -1;
    if (!present)
        return perr(ps, gob->o[0], NULL, gob->path, "missing \"pci\"");
    if (check_keys(ps, &ob, keys) != 0 ||
        get_u32(ps, &ob, "domain", 0, 0xFFFFFFFFu, &g->pci_domain) != 0 ||
        get_u32(ps, &ob, "bus", 0, 0xFF, &g->pci_bus) != 0 ||
        get_u32(ps, &ob, "device", 0, 0x1F, &g->pci_device) != 0 ||
        get_u32(ps, &ob, "subsystem_id", 0, 0xFFFFFFFFu, &g->pci_subsys_id) != 0 ||
        get_uint(ps, &ob, "device_id", 0, 0xFFFFFFFFull, &u, &present) != 0 ||
        get_str(ps, &ob, "bus_id", g->bus_id, sizeof g->bus_id, &has_bus_id) != 0 ||
        get_uint(ps, &ob, "base_class", 0, 0xFF, &cls[0], &has_cls[0]) != 0 ||
        get_uint(ps, &ob, "sub_class", 0, 0xFF, &cls[1], &has_cls[1]) != 0)
        return -1;
    if (!present)
        return perr(ps, ob.o[0], NULL, ob.path, "missing \"device_id\"");
    /* either class code makes nvmlDeviceGetPciInfoExt answer; the other one is then 0 */
    g->has_pci_class = has_cls[0] || has_cls[1];
    g->pci_base_class = has_cls[0] ? (unsigned)cls[0] : 0;
    g->pci_sub_class = has_cls[1] ? (unsigned)cls[1] : 0;
    /* A 16-bit id is the device alone; NVML reports device << 16 | vendor (0x10DE). */
    g->pci_device_id = u <= 0xFFFF ? (unsigned)(u << 16 | 0x10DE) : (unsigned)u;
    if (!has_bus_id)
        snprintf(g->bus_id, sizeof g->bus_id, "%08X:%02X:%02X.0", g->pci_domain, g->pci_bus,
                 g->pci_device);
    else if (strlen(g->bus_id) >= NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE)
        return perr(ps, jget(&ob, "bus_id", NULL), ob.o[0], ob.path, "bus_id too long");
    return 0;
}

static int parse_power(struct parse *ps, const struct jobj *gob, struct gs_sim_gpu *g)
{
    static const char *const keys[] = {"default_limit_w",  "limit_w",     "enforced_limit_w",
                                       "min_limit_w",      "max_limit_w", "energy_base_mj",
                                       "energy_supported", NULL};
    struct jobj ob;
    double w[5];
    bool p[5], present, any = false;
    static const char *const names[5] = {"default_limit_w", "limit_w", "enforced_limit_w",
                                         "min_limit_w", "max_limit_w"};

    g->has_energy = g->arch >= NVML_DEVICE_ARCH_VOLTA && g->arch != NVML_DEVICE_ARCH_UNKNOWN;
    if (get_child(ps, gob, "power", &ob, &present) != 0)
        return -1;
    if (!present)
        return 0;
    if (check_keys(ps, &ob, keys) != 0)
        return -1;
    for (int i = 0; i < 5; i++) {
        if (get_num(ps, &ob, names[i], 0, 1e6, &w[i], &p[i]) != 0)
            return -1;
        any |= p[i];
    }
    if (any && !p[0])
        return perr(ps, ob.o[0], NULL, ob.path, "power limits need default_limit_w");
    if (any) {
        g->has_power_limits = true;
        g->power_default_mw = (unsigned)llround(w[0] * 1000);
        g->power_limit_mw = p[1] ? (unsigned)llround(w[1] * 1000) : g->power_default_mw;
        g->power_enforced_mw = p[2] ? (unsigned)llround(w[2] * 1000) : g->power_limit_mw;
        g->power_min_mw = p[3] ? (unsigned)llround(w[3] * 1000) : g->power_default_mw;
        g->power_max_mw = p[4] ? (unsigned)llround(w[4] * 1000) : g->power_default_mw;
        if (g->power_min_mw > g->power_max_mw)
            return perr(ps, ob.o[0], NULL, ob.path, "min_limit_w exceeds max_limit_w");
    }
    if (get_num(ps, &ob, "energy_base_mj", 0, 1e18, &g->energy_base_mj, &present) != 0 ||
        get_bool(ps, &ob, "energy_supported", &g->has_energy) != 0)
        return -1;
    return 0;
}

static int parse_ecc(struct parse *ps, const struct jobj *gob, struct gs_sim_gpu *g)
{
    static const char *const keys[] = {
        "current", "pending", "locations", "aggregate_corrected", "aggregate_uncorrected", NULL};
    static const char *const agg_key[2] = {"aggregate_corrected", "aggregate_uncorrected"};
    struct jobj ob, agg;
    const json_t *where, *locs;
    bool present;

    if (get_child(ps, gob, "ecc", &ob, &present) != 0)
        return -1;
    if (!present)
        return 0;
    g->has_ecc = true;
    g->ecc_current = g->ecc_pending = true;
    if (check_keys(ps, &ob, keys) != 0 || get_bool(ps, &ob, "current", &g->ecc_current) != 0)
        return -1;
    g->ecc_pending = g->ecc_current;
    if (get_bool(ps, &ob, "pending", &g->ecc_pending) != 0)
        return -1;
    locs = jget(&ob, "locations", &where);
    if (!locs) {
        g->ecc_location[2] = true; /* device memory */
    } else {
        char path[256];
        path_join(path, sizeof path, ob.path, "locations");
        if (!json_is_array(locs))
            return perr(ps, locs, where, path, "expected an array of location names");
        for (size_t i = 0; i < json_array_size(locs); i++) {
            unsigned long long loc;
            if (to_enum(ps, json_array_get(locs, i), locs, path, location_names, false, &loc))
                return -1;
            g->ecc_location[loc] = true;
        }
    }
    for (int type = 0; type < 2; type++) {
        if (get_child(ps, &ob, agg_key[type], &agg, &present) != 0)
            return -1;
        if (!present)
            continue;
        for (unsigned i = 0; i < agg.n; i++) {
            const char *key;
            json_t *v;
            json_object_foreach((json_t *)agg.o[i], key, v)
            {
                unsigned long long loc, count;
                if (lookup_name(location_names, key, &loc) != 0)
                    return perr(ps, v, agg.o[i], agg.path, "unknown location \"%.64s\"", key);
                if (to_uint(ps, v, agg.o[i], agg.path, 0, 1ull << 62, &count) != 0)
                    return -1;
                if (i == 0 || !json_object_get(agg.o[0], key))
                    g->ecc_aggregate[type][loc] = count;
            }
        }
    }
    return 0;
}

static int parse_addr_list(struct parse *ps, const struct jobj *ob, const char *key,
                           struct gs_sim_gpu *g, int cause)
{
    const json_t *where;
    const json_t *arr = jget(ob, key, &where);
    char path[256];
    size_t n;

    if (!arr)
        return 0;
    path_join(path, sizeof path, ob->path, key);
    n = json_array_size(arr);
    if (!json_is_array(arr))
        return perr(ps, arr, where, path, "expected an array of page addresses");
    if (n > GS_SIM_MAX_RETIRED)
        return perr(ps, arr, where, path, "more than %u pages", GS_SIM_MAX_RETIRED);
    g->retired_addr[cause] = arena_alloc(ps->sc, (n ? n : 1) * sizeof(unsigned long long));
    if (!g->retired_addr[cause])
        return perr(ps, arr, where, path, "out of memory");
    for (size_t i = 0; i < n; i++) {
        if (to_uint(ps, json_array_get(arr, i), arr, path, 0, UINT64_MAX,
                    &g->retired_addr[cause][i]) != 0)
            return -1;
    }
    g->retired_count[cause] = (unsigned)n;
    return 0;
}

static int parse_health(struct parse *ps, const struct jobj *gob, struct gs_sim_gpu *g)
{
    struct jobj sub;
    static const char *const rp_keys[] = {"single_bit_ecc", "double_bit_ecc", "pending", NULL};
    static const char *const rr_keys[] = {
        "correctable",          "uncorrectable",          "pending", "failure", "histogram",
        "correctable_inactive", "uncorrectable_inactive", NULL};
    static const char *const hist_keys[] = {"max", "high", "partial", "low", "none", NULL};
    struct jobj ob;
    bool present;

    if (parse_ecc(ps, gob, g) != 0 || get_child(ps, gob, "retired_pages", &ob, &present) != 0)
        return -1;
    if (present) {
        g->has_retired = true;
        if (check_keys(ps, &ob, rp_keys) != 0 ||
            parse_addr_list(ps, &ob, "single_bit_ecc", g, 0) != 0 ||
            parse_addr_list(ps, &ob, "double_bit_ecc", g, 1) != 0 ||
            get_bool(ps, &ob, "pending", &g->retired_pending) != 0)
            return -1;
    }
    if (get_child(ps, gob, "remapped_rows", &ob, &present) != 0)
        return -1;
    if (present) {
        g->has_remap = true;
        if (check_keys(ps, &ob, rr_keys) != 0 ||
            get_u32(ps, &ob, "correctable", 0, 1u << 30, &g->remap_corr) != 0 ||
            get_u32(ps, &ob, "uncorrectable", 0, 1u << 30, &g->remap_unc) != 0 ||
            get_bool(ps, &ob, "pending", &g->remap_pending) != 0 ||
            get_bool(ps, &ob, "failure", &g->remap_failure) != 0)
            return -1;
        for (int i = 0; i < 2; i++) {
            unsigned long long u;
            if (get_uint(ps, &ob, i ? "uncorrectable_inactive" : "correctable_inactive", 0,
                         1u << 30, &u, &g->has_remap_inactive[i]) != 0)
                return -1;
            g->remap_inactive[i] = (unsigned)u;
        }
        if (get_child(ps, &ob, "histogram", &sub, &g->has_remap_hist) != 0)
            return -1;
        for (int i = 0; g->has_remap_hist && i < 5; i++)
            if ((i == 0 && check_keys(ps, &sub, hist_keys) != 0) ||
                get_u32(ps, &sub, hist_keys[i], 0, 1u << 30, &g->remap_hist[i]) != 0)
                return -1;
    }
    return 0;
}

static int parse_inforom(struct parse *ps, const struct jobj *gob, struct gs_sim_gpu *g)
{
    static const char *const keys[] = {"image", "oem", "ecc", "power", "valid", NULL};
    struct jobj ob;
    bool present;

    if (get_child(ps, gob, "inforom", &ob, &present) != 0)
        return -1;
    if (!present)
        return 0;
    g->has_inforom = true;
    g->inforom_valid = true;
    if (check_keys(ps, &ob, keys) != 0 || get_bool(ps, &ob, "valid", &g->inforom_valid) != 0)
        return -1;
    for (int i = 0; i < 4; i++)
        if (get_str(ps, &ob, keys[i], g->inforom[i], sizeof g->inforom[i], &present) != 0)
            return -1;
    return 0;
}

/* "display", "accounting" and "gsp_firmware": small objects of modes. */
static int parse_modes(struct parse *ps, const struct jobj *gob, struct gs_sim_gpu *g)
{
    static const char *const dkeys[] = {"attached", "active", NULL};
    static const char *const akeys[] = {"mode", "buffer_size", NULL};
    static const char *const gkeys[] = {"enabled", "default", NULL};
    struct jobj ob;
    bool present;

    if (get_child(ps, gob, "display", &ob, &present) != 0)
        return -1;
    if (present) {
        if (check_keys(ps, &ob, dkeys) != 0)
            return -1;
        g->has_display_attached = jget(&ob, "attached", NULL) != NULL;
        g->has_display_active = jget(&ob, "active", NULL) != NULL;
        if (get_bool(ps, &ob, "attached", &g->display_attached) != 0 ||
            get_bool(ps, &ob, "active", &g->display_active) != 0)
            return -1;
    }
    if (get_child(ps, gob, "accounting", &ob, &present) != 0)
        return -1;
    if (present) {
        if (check_keys(ps, &ob, akeys) != 0)
            return -1;
        g->has_accounting_mode = jget(&ob, "mode", NULL) != NULL;
        g->has_accounting_buffer = jget(&ob, "buffer_size", NULL) != NULL;
        if (get_bool(ps, &ob, "mode", &g->accounting_mode) != 0 ||
            get_u32(ps, &ob, "buffer_size", 0, 0xFFFFFFFFu, &g->accounting_buffer) != 0)
            return -1;
    }
    if (get_child(ps, gob, "gsp_firmware", &ob, &present) != 0)
        return -1;
    if (present) {
        g->has_gsp = true;
        g->gsp_enabled = true;
        if (check_keys(ps, &ob, gkeys) != 0 || get_bool(ps, &ob, "enabled", &g->gsp_enabled) != 0)
            return -1;
        g->gsp_default = g->gsp_enabled;
        if (get_bool(ps, &ob, "default", &g->gsp_default) != 0)
            return -1;
    }
    return 0;
}

static int parse_thresholds(struct parse *ps, const struct jobj *gob, struct gs_sim_gpu *g)
{
    struct jobj ob;
    bool present;

    if (get_child(ps, gob, "thresholds_c", &ob, &present) != 0)
        return -1;
    if (!present)
        return 0;
    for (unsigned i = 0; i < ob.n; i++) {
        const char *key;
        json_t *v;
        json_object_foreach((json_t *)ob.o[i], key, v)
        {
            unsigned long long which, c;
            if (lookup_name(threshold_names, key, &which) != 0)
                return perr(ps, v, ob.o[i], ob.path, "unknown threshold \"%.64s\"", key);
            if (i > 0 && json_object_get(ob.o[0], key))
                continue; /* the GPU's own value wins over the template's */
            if (json_is_null(v))
                continue;
            if (to_uint(ps, v, ob.o[i], ob.path, 0, 300, &c) != 0)
                return -1;
            g->has_threshold[which] = true;
            g->threshold_c[which] = (unsigned)c;
        }
    }
    return 0;
}

/* "board": {"id": 9, "multi_gpu": false, "part_number": "692-2G520-0200-000"} and
 * "gsp_firmware_version": "590.48.01". */
static int parse_board(struct parse *ps, const struct jobj *gob, struct gs_sim_gpu *g)
{
    static const char *const keys[] = {"id", "multi_gpu", "part_number", NULL};
    struct jobj ob;
    bool present;

    if (get_str(ps, gob, "gsp_firmware_version", g->gsp_version, sizeof g->gsp_version, &present) !=
            0 ||
        get_child(ps, gob, "board", &ob, &g->has_board) != 0)
        return -1;
    if (!g->has_board)
        return 0;
    return check_keys(ps, &ob, keys) != 0 ||
                   get_u32(ps, &ob, "id", 0, 0xFFFFFFFFu, &g->board_id) != 0 ||
                   get_bool(ps, &ob, "multi_gpu", &g->multi_gpu_board) != 0 ||
                   get_str(ps, &ob, "part_number", g->board_part, sizeof g->board_part, &present) !=
                       0
               ? -1
               : 0;
}

/* What only nvidia-smi -q shows: "addressing_mode", "virtualization_mode", "host_vgpu_mode",
 * "recovery_action" (names), "c2c_mode" and "egm" (true/false), "sram_ecc" (counts and
 * "threshold_exceeded") and "fabric" ({"state", "status", "clique_id", "cluster_uuid",
 * "health_mask", "health_summary"}). */
static int parse_detail(struct parse *ps, const struct jobj *gob, struct gs_sim_gpu *g)
{
    static const char *const sram_keys[] = {"aggregate_parity",
                                            "aggregate_secded",
                                            "aggregate_corrected",
                                            "volatile_parity",
                                            "volatile_secded",
                                            "volatile_corrected",
                                            "l2",
                                            "sm",
                                            "pcie",
                                            "mcu",
                                            "other",
                                            "threshold_exceeded",
                                            NULL};
    static const char *const fabric_keys[] = {
        "state", "status", "clique_id", "cluster_uuid", "health_mask", "health_summary", NULL};
    struct jobj ob;
    bool present;
    char uuid[48];

    if (get_enum(ps, gob, "addressing_mode", addressing_names, false, &g->addressing_mode,
                 &g->has_addressing) != 0 ||
        get_enum(ps, gob, "virtualization_mode", virt_names, false, &g->virt_mode, &g->has_virt) !=
            0 ||
        get_enum(ps, gob, "host_vgpu_mode", host_vgpu_names, false, &g->host_vgpu_mode,
                 &g->has_host_vgpu) != 0 ||
        get_enum(ps, gob, "recovery_action", recovery_names, false, &g->recovery_action,
                 &g->has_recovery) != 0)
        return -1;
    if (get_child(ps, gob, "tlimit_thresholds_c", &ob, &present) != 0)
        return -1;
    if (present) {
        static const char *const tl_keys[] = {"shutdown", "slowdown", "mem_max", "gpu_max", NULL};
        if (check_keys(ps, &ob, tl_keys) != 0)
            return -1;
        for (int i = 0; i < 4; i++) {
            double d;
            if (get_num(ps, &ob, tl_keys[i], -300, 300, &d, &g->has_tlimit[i]) != 0)
                return -1;
            if (g->has_tlimit[i] && d != floor(d))
                return perr(ps, jget(&ob, tl_keys[i], NULL), NULL, ob.path,
                            "%s: expected whole degrees", tl_keys[i]);
            g->tlimit_c[i] = (int)d;
        }
    }
    if (get_u32(ps, gob, "edpp_multiplier_pct", 0, 1000, &g->edpp_pct) != 0)
        return -1;
    g->has_edpp = jget(gob, "edpp_multiplier_pct", NULL) != NULL;
    g->has_c2c = jget(gob, "c2c_mode", NULL) != NULL;
    g->has_egm = jget(gob, "egm", NULL) != NULL;
    if (get_bool(ps, gob, "c2c_mode", &g->c2c_enabled) != 0 ||
        get_bool(ps, gob, "egm", &g->egm) != 0 ||
        get_child(ps, gob, "sram_ecc", &ob, &g->has_sram) != 0)
        return -1;
    if (g->has_sram) {
        unsigned long long u;
        if (check_keys(ps, &ob, sram_keys) != 0 ||
            get_bool(ps, &ob, "threshold_exceeded", &g->sram_threshold) != 0)
            return -1;
        for (int i = 0; i < 11; i++) {
            if (get_uint(ps, &ob, sram_keys[i], 0, 1ull << 62, &u, &present) != 0)
                return -1;
            g->sram[i] = present ? u : 0;
        }
    }
    if (get_child(ps, gob, "fabric", &ob, &g->has_fabric) != 0)
        return -1;
    if (!g->has_fabric)
        return 0;
    g->fabric_state = NVML_GPU_FABRIC_STATE_COMPLETED;
    if (check_keys(ps, &ob, fabric_keys) != 0 ||
        get_enum(ps, &ob, "state", fabric_state_names, false, &g->fabric_state, &present) != 0 ||
        get_u32(ps, &ob, "clique_id", 0, 0xFFFFFFFFu, &g->fabric_clique) != 0 ||
        get_u32(ps, &ob, "health_mask", 0, 0xFFFFFFFFu, &g->fabric_health_mask) != 0 ||
        get_enum(ps, &ob, "health_summary", fabric_health_names, false, &g->fabric_health_summary,
                 &present) != 0 ||
        get_str(ps, &ob, "cluster_uuid", uuid, sizeof uuid, &present) != 0)
        return -1;
    if (present) {
        const char *p = uuid;
        for (int i = 0; i < 16; i++) {
            unsigned hi, lo;
            if (*p == '-' && (i == 4 || i == 6 || i == 8 || i == 10))
                p++;
            if (!isxdigit((unsigned char)p[0]) || !isxdigit((unsigned char)p[1]))
                return perr(ps, jget(&ob, "cluster_uuid", NULL), NULL, ob.path,
                            "cluster_uuid: expected 32 hex digits as 8-4-4-4-12");
            hi = (unsigned)(isdigit((unsigned char)p[0]) ? p[0] - '0' : (tolower(p[0]) - 'a' + 10));
            lo = (unsigned)(isdigit((unsigned char)p[1]) ? p[1] - '0' : (tolower(p[1]) - 'a' + 10));
            g->fabric_cluster[i] = (unsigned char)(hi << 4 | lo);
            p += 2;
        }
        if (*p)
            return perr(ps, jget(&ob, "cluster_uuid", NULL), NULL, ob.path,
                        "cluster_uuid: expected 32 hex digits as 8-4-4-4-12");
    }
    {
        const json_t *where;
        const json_t *v = jget(&ob, "status", &where);
        char path[256];
        path_join(path, sizeof path, ob.path, "status");
        g->fabric_status = NVML_SUCCESS;
        if (v) {
            unsigned long long rc;
            if (to_enum(ps, v, where, path, rc_names, true, &rc) != 0)
                return -1;
            g->fabric_status = (int)rc;
        }
    }
    return 0;
}

static const struct name_val gom_names[] = {
    {"all_on", NVML_GOM_ALL_ON},
    {"compute", NVML_GOM_COMPUTE},
    {"low_dp", NVML_GOM_LOW_DP},
    {NULL, 0},
};

/* The whole GPU's other -q rows: "pdi" (64-bit, "0x..." or a number), "module_id",
 * "gpu_operation_mode" ({"current", "pending"}: all_on, compute, low_dp),
 * "vgpu_heterogeneous_mode" (true/false), "pcie_atomics" ({"outbound", "inbound"}: masks of
 * NVML_PCIE_ATOMICS_CAP_* bits), "protected_memory" ({"total_mib"|"total_bytes",
 * "used_mib"|"used_bytes"}) and "unrepairable_memory" (true/false). A key left out: the call (or
 * field) answers NOT_SUPPORTED. */
static int parse_detail_gpu(struct parse *ps, const struct jobj *gob, struct gs_sim_gpu *g)
{
    static const char *const gom_keys[] = {"current", "pending", NULL};
    static const char *const atom_keys[] = {"outbound", "inbound", NULL};
    static const char *const prot_keys[] = {"total_mib", "total_bytes", "used_mib", "used_bytes",
                                            NULL};
    struct jobj ob;
    bool present;
    unsigned long long u;

    if (get_uint(ps, gob, "pdi", 0, ~0ull, &g->pdi, &g->has_pdi) != 0 ||
        get_uint(ps, gob, "module_id", 0, 0xFFFFFFFFull, &u, &g->has_module_id) != 0)
        return -1;
    g->module_id = (unsigned)u;
    g->has_vgpu_hetero = jget(gob, "vgpu_heterogeneous_mode", NULL) != NULL;
    g->has_unrepairable = jget(gob, "unrepairable_memory", NULL) != NULL;
    if (get_bool(ps, gob, "vgpu_heterogeneous_mode", &g->vgpu_hetero) != 0 ||
        get_bool(ps, gob, "unrepairable_memory", &g->unrepairable) != 0)
        return -1;
    if (get_child(ps, gob, "gpu_operation_mode", &ob, &g->has_gom) != 0)
        return -1;
    if (g->has_gom) {
        g->gom[0] = g->gom[1] = NVML_GOM_ALL_ON;
        if (check_keys(ps, &ob, gom_keys) != 0 ||
            get_enum(ps, &ob, "current", gom_names, false, &g->gom[0], &present) != 0)
            return -1;
        g->gom[1] = g->gom[0]; /* pending defaults to the current mode */
        if (get_enum(ps, &ob, "pending", gom_names, false, &g->gom[1], &present) != 0)
            return -1;
    }
    if (get_child(ps, gob, "pcie_atomics", &ob, &present) != 0)
        return -1;
    if (present && check_keys(ps, &ob, atom_keys) != 0)
        return -1;
    for (int i = 0; present && i < 2; i++) {
        if (get_uint(ps, &ob, atom_keys[i], 0, 0x7F, &u, &g->has_atomics[i]) != 0)
            return -1;
        g->atomics[i] = (unsigned)u;
    }
    if (get_child(ps, gob, "protected_memory", &ob, &g->has_protected) != 0)
        return -1;
    if (g->has_protected) {
        if (check_keys(ps, &ob, prot_keys) != 0 ||
            get_size(ps, &ob, "total", &g->protected_total, &present) != 0 ||
            get_size(ps, &ob, "used", &g->protected_used, &present) != 0)
            return -1;
        if (g->protected_used > g->protected_total)
            return perr(ps, ob.o[0], NULL, ob.path, "used exceeds total");
    }
    return 0;
}

/* A CPU or NUMA node list as ranges: "0-19", "0-55,112-167", "0", each range rising. */
static bool ranges_ok(const char *s, unsigned long long max)
{
    while (*s) {
        char *e;
        unsigned long long lo, hi;
        if (*s < '0' || *s > '9')
            return false;
        lo = hi = strtoull(s, &e, 10);
        if (*e == '-') {
            if (e[1] < '0' || e[1] > '9')
                return false;
            hi = strtoull(e + 1, &e, 10);
        }
        if (lo > hi || hi > max || (*e && *e != ','))
            return false;
        s = *e ? e + 1 : e;
        if (*e && !*s)
            return false;
    }
    return true;
}

static const struct name_val topo_levels[] = {
    {"internal", NVML_TOPOLOGY_INTERNAL},
    {"single", NVML_TOPOLOGY_SINGLE},
    {"multiple", NVML_TOPOLOGY_MULTIPLE},
    {"hostbridge", NVML_TOPOLOGY_HOSTBRIDGE},
    {"node", NVML_TOPOLOGY_NODE},
    {"system", NVML_TOPOLOGY_SYSTEM},
    {NULL, 0},
};

/* "topology": {"cpu_affinity": "0-55,112-167", "numa_affinity": "0", "gpu_numa_id": 2,
 * "common_ancestor": [null, "node", "system", ...]} (one entry per GPU, null for itself or
 * a pair the driver does not answer). */
static int parse_topology(struct parse *ps, const struct jobj *gob, struct gs_sim_gpu *g)
{
    static const char *const keys[] = {"cpu_affinity", "numa_affinity", "gpu_numa_id",
                                       "common_ancestor", NULL};
    const json_t *arr, *where, *v;
    struct jobj ob;
    bool present;
    char path[300];
    size_t i;

    if (get_child(ps, gob, "topology", &ob, &present) != 0)
        return -1;
    if (!present)
        return 0;
    if (check_keys(ps, &ob, keys) != 0 ||
        get_str(ps, &ob, "cpu_affinity", g->cpu_affinity, sizeof g->cpu_affinity, &present) != 0 ||
        get_str(ps, &ob, "numa_affinity", g->numa_affinity, sizeof g->numa_affinity, &present) !=
            0 ||
        get_u32(ps, &ob, "gpu_numa_id", 0, 1023, &g->gpu_numa_id) != 0)
        return -1;
    g->has_gpu_numa = jget(&ob, "gpu_numa_id", NULL) != NULL;
    if (!ranges_ok(g->cpu_affinity, 8191))
        return perr(ps, jget(&ob, "cpu_affinity", &where), gob->o[0], ob.path,
                    "cpu_affinity: expected CPU ranges such as \"0-19,40-59\"");
    if (!ranges_ok(g->numa_affinity, 1023))
        return perr(ps, jget(&ob, "numa_affinity", &where), gob->o[0], ob.path,
                    "numa_affinity: expected NUMA node ranges such as \"0\" or \"0-1\"");
    if ((arr = jget(&ob, "common_ancestor", &where)) != NULL) {
        path_join(path, sizeof path, ob.path, "common_ancestor");
        if (!json_is_array(arr) || json_array_size(arr) > GS_SIM_MAX_GPUS)
            return perr(ps, arr, where, path, "expected an array of at most %u levels",
                        GS_SIM_MAX_GPUS);
        json_array_foreach(arr, i, v)
        {
            unsigned long long u;
            if (json_is_null(v))
                continue;
            if (to_enum(ps, v, arr, path, topo_levels, false, &u) != 0)
                return -1;
            g->has_level[i] = true;
            g->level[i] = (unsigned)u;
        }
    }
    return 0;
}

static int parse_clocks_pcie(struct parse *ps, const struct jobj *gob, struct gs_sim_gpu *g)
{
    static const char *const ck[] = {"graphics", "sm", "mem", "video", "customer_boost_graphics",
                                     NULL};
    static const char *const pk[] = {
        "max_gen",          "gpu_max_gen",   "max_width", "replay_count", "replay_rollover_count",
        "count_base_bytes", "count_reset_s", NULL};
    struct jobj ob;
    bool present;

    if (get_child(ps, gob, "clocks_max_mhz", &ob, &present) != 0)
        return -1;
    if (present) {
        if (check_keys(ps, &ob, ck) != 0)
            return -1;
        for (int i = 0; i < 4; i++)
            if (get_u32(ps, &ob, ck[i], 0, 100000, &g->clock_max_mhz[i]) != 0)
                return -1;
        if (get_u32(ps, &ob, "customer_boost_graphics", 0, 100000, &g->clock_boost_max_mhz) != 0)
            return -1;
    }
    g->pcie_max_gen = 4;
    g->pcie_max_width = 16;
    if (get_child(ps, gob, "pcie", &ob, &present) != 0)
        return -1;
    if (present) {
        if (check_keys(ps, &ob, pk) != 0 ||
            get_u32(ps, &ob, "max_gen", 1, 8, &g->pcie_max_gen) != 0)
            return -1;
        g->pcie_gpu_max_gen = g->pcie_max_gen;
        if (get_u32(ps, &ob, "gpu_max_gen", 1, 8, &g->pcie_gpu_max_gen) != 0 ||
            get_u32(ps, &ob, "max_width", 1, 32, &g->pcie_max_width) != 0 ||
            get_u32(ps, &ob, "replay_count", 0, 0xFFFFFFFFu, &g->pcie_replays) != 0 ||
            get_u32(ps, &ob, "replay_rollover_count", 0, 0xFFFFFFFFu, &g->pcie_replay_rollovers) !=
                0 ||
            get_num(ps, &ob, "count_base_bytes", 0, 1.8446744073709e19, &g->pcie_count_base,
                    &present) != 0 ||
            get_num(ps, &ob, "count_reset_s", 0, 1e9, &g->pcie_count_reset_s, &present) != 0)
            return -1;
        if (!present)
            g->pcie_count_reset_s = -1;
    } else {
        g->pcie_gpu_max_gen = g->pcie_max_gen;
        g->pcie_count_reset_s = -1;
    }
    return 0;
}

/* "nvlink": {"links": 18, "speed_mbps": 26562, "inactive": [3], "remote_bus_ids": [...],
 * "errors": [{"link": 7, "replay": 12, ...}], "raw_overhead": 0.06}. Remote bus ids repeat
 * over the links when fewer are given (4 NVSwitches for 18 links). */
static int parse_nvlink(struct parse *ps, const struct jobj *gob, struct gs_sim_gpu *g)
{
    static const char *const keys[] = {"links",  "speed_mbps",   "inactive",     "remote_bus_ids",
                                       "errors", "raw_overhead", "capabilities", NULL};
    static const struct name_val caps[] = {
        {"p2p", NVML_NVLINK_CAP_P2P_SUPPORTED},
        {"sysmem_access", NVML_NVLINK_CAP_SYSMEM_ACCESS},
        {"p2p_atomics", NVML_NVLINK_CAP_P2P_ATOMICS},
        {"sysmem_atomics", NVML_NVLINK_CAP_SYSMEM_ATOMICS},
        {"sli", NVML_NVLINK_CAP_SLI_BRIDGE},
        {"valid", NVML_NVLINK_CAP_VALID},
        {NULL, 0},
    };
    static const char *const ekeys[] = {"link", "replay", "recovery", "crc_flit", "crc_data", NULL};
    struct gs_sim_nvlink *nl = &g->nvlink;
    const json_t *arr, *where, *v;
    struct jobj ob;
    bool present;
    char path[300];
    size_t i;

    memset(nl, 0, sizeof *nl);
    if (get_child(ps, gob, "nvlink", &ob, &present) != 0)
        return -1;
    if (!present)
        return 0;
    nl->raw_overhead = 0.06;
    if (check_keys(ps, &ob, keys) != 0 ||
        get_u32(ps, &ob, "links", 0, GS_SIM_NVLINK_MAX, &nl->n_links) != 0 ||
        get_u32(ps, &ob, "speed_mbps", 0, 1000000, &nl->speed_mbps) != 0 ||
        get_num(ps, &ob, "raw_overhead", 0, 10, &nl->raw_overhead, &present) != 0)
        return -1;
    for (unsigned l = 0; l < nl->n_links; l++)
        nl->active[l] = true;
    if ((arr = jget(&ob, "inactive", &where)) != NULL) {
        path_join(path, sizeof path, ob.path, "inactive");
        if (!json_is_array(arr))
            return perr(ps, arr, where, path, "expected an array of link numbers");
        json_array_foreach(arr, i, v)
        {
            unsigned long long l;
            if (to_uint(ps, v, arr, path, 0, nl->n_links ? nl->n_links - 1 : 0, &l) != 0)
                return -1;
            nl->active[l] = false;
        }
    }
    if ((arr = jget(&ob, "capabilities", &where)) != NULL) {
        path_join(path, sizeof path, ob.path, "capabilities");
        if (!json_is_array(arr))
            return perr(ps, arr, where, path, "expected an array of capability names");
        json_array_foreach(arr, i, v)
        {
            unsigned long long c;
            if (to_enum(ps, v, arr, path, caps, false, &c) != 0)
                return -1;
            nl->caps |= 1u << c;
        }
        nl->has_caps = true;
    }
    if ((arr = jget(&ob, "remote_bus_ids", &where)) != NULL) {
        size_t n;
        path_join(path, sizeof path, ob.path, "remote_bus_ids");
        if (!json_is_array(arr) || (n = json_array_size(arr)) == 0 || n > GS_SIM_NVLINK_MAX)
            return perr(ps, arr, where, path, "expected 1 to %u bus id strings", GS_SIM_NVLINK_MAX);
        for (unsigned l = 0; l < nl->n_links; l++) {
            const json_t *s = json_array_get(arr, l % n);
            if (!json_is_string(s) || json_string_length(s) >= sizeof nl->remote[l] ||
                json_string_length(s) == 0)
                return perr(ps, s, arr, path, "expected a bus id such as \"00000000:05:00.0\"");
            snprintf(nl->remote[l], sizeof nl->remote[l], "%s", json_string_value(s));
        }
    }
    if ((arr = jget(&ob, "errors", &where)) != NULL) {
        path_join(path, sizeof path, ob.path, "errors");
        if (!json_is_array(arr) || json_array_size(arr) > GS_SIM_NVLINK_MAX)
            return perr(ps, arr, where, path, "expected an array of at most %u objects",
                        GS_SIM_NVLINK_MAX);
        json_array_foreach(arr, i, v)
        {
            struct jobj eo;
            unsigned long long l, n;
            char epath[sizeof path + 24];
            snprintf(epath, sizeof epath, "%s[%zu]", path, i);
            if (!json_is_object(v))
                return perr(ps, v, arr, epath, "expected an object");
            jobj_one(&eo, v, epath);
            if (check_keys(ps, &eo, ekeys) != 0 ||
                get_uint(ps, &eo, "link", 0, nl->n_links ? nl->n_links - 1 : 0, &l, &present) != 0)
                return -1;
            if (!present)
                return perr(ps, v, arr, epath, "missing \"link\"");
            for (unsigned e = 0; e < GS_SIM_NVLINK_ERRORS; e++) {
                if (get_uint(ps, &eo, ekeys[e + 1], 0, 1ull << 48, &n, &present) != 0)
                    return -1;
                if (present)
                    nl->errors[l][e] = n;
            }
        }
    }
    return 0;
}

/* An instance's reserved memory and SRAM ECC count (what only nvidia-smi -q prints). */
static int parse_mig_more(struct parse *ps, const struct jobj *ob, struct gs_sim_mig *m)
{
    bool present;

    if (get_size(ps, ob, "memory_reserved", &m->mem_reserved_bytes, &present) != 0 ||
        get_uint(ps, ob, "ecc_sram_uncorrected_volatile", 0, 1ull << 40, &m->sram_unc_vol,
                 &present) != 0)
        return -1;
    if (m->mem_reserved_bytes > m->mem_total_bytes)
        return perr(ps, ob->o[0], NULL, ob->path, "memory_reserved exceeds memory_total");
    return 0;
}

static int parse_mig_instance(struct parse *ps, const json_t *v, const json_t *where,
                              const char *path, struct gs_sim_gpu *g, size_t pos)
{
    static const char *const keys[] = {"slot",
                                       "gi",
                                       "ci",
                                       "profile",
                                       "name",
                                       "uuid",
                                       "memory_total_mib",
                                       "memory_total_bytes",
                                       "bar1_total_mib",
                                       "bar1_total_bytes",
                                       "sm_count",
                                       "ce_count",
                                       "enc_count",
                                       "dec_count",
                                       "ofa_count",
                                       "jpg_count",
                                       "metrics",
                                       "placement",
                                       "profile_id",
                                       "memory_reserved_mib",
                                       "memory_reserved_bytes",
                                       "ecc_sram_uncorrected_volatile",
                                       NULL};
    static const char *const place_keys[] = {"start", "size", NULL};
    struct jobj ob, mob, pob;
    struct gs_sim_mig *m;
    unsigned slot = (unsigned)pos;
    bool present;

    if (!json_is_object(v))
        return perr(ps, v, where, path, "expected an object");
    jobj_one(&ob, v, path);
    if (check_keys(ps, &ob, keys) != 0 || get_u32(ps, &ob, "slot", 0, GS_SIM_MAX_MIG - 1, &slot))
        return -1;
    if (slot >= GS_SIM_MAX_MIG)
        return perr(ps, v, where, path, "more than %u MIG devices", GS_SIM_MAX_MIG);
    m = &g->mig[slot];
    if (m->present)
        return perr(ps, v, where, path, "slot %u is used twice", slot);
    m->present = true;
    m->gi = m->ci = 0;
    if (get_u32(ps, &ob, "gi", 0, 1000, &m->gi) != 0 ||
        get_u32(ps, &ob, "ci", 0, 1000, &m->ci) != 0 ||
        get_str(ps, &ob, "profile", m->profile, sizeof m->profile, &present) != 0)
        return -1;
    if (!present)
        return perr(ps, v, where, path, "missing \"profile\" (e.g. \"3g.40gb\")");
    if (!jget(&ob, "gi", NULL))
        return perr(ps, v, where, path, "missing \"gi\" (GPU instance id)");
    if (get_str(ps, &ob, "name", m->name, sizeof m->name, &present) != 0)
        return -1;
    if (!present) {
        char name[GS_SIM_STR_MAX];
        snprintf(name, sizeof name, "%.60s MIG %.30s", g->name, m->profile);
        memcpy(m->name, name, sizeof name);
    }
    if (get_str(ps, &ob, "uuid", m->uuid, sizeof m->uuid, &present) != 0)
        return -1;
    if (!present)
        return perr(ps, v, where, path, "missing \"uuid\" (\"MIG-...\")");
    if (get_size(ps, &ob, "memory_total", &m->mem_total_bytes, &present) != 0)
        return -1;
    if (!present)
        return perr(ps, v, where, path, "missing memory_total_mib");
    if (get_size(ps, &ob, "bar1_total", &m->bar1_total_bytes, &present) != 0 ||
        get_u32(ps, &ob, "sm_count", 0, 100000, &m->sm_count) != 0 ||
        get_u32(ps, &ob, "ce_count", 0, 64, &m->ce_count) != 0 ||
        get_u32(ps, &ob, "enc_count", 0, 64, &m->enc_count) != 0 ||
        get_u32(ps, &ob, "dec_count", 0, 64, &m->dec_count) != 0 ||
        get_u32(ps, &ob, "ofa_count", 0, 64, &m->ofa_count) != 0 ||
        get_u32(ps, &ob, "jpg_count", 0, 64, &m->jpg_count) != 0 ||
        get_child(ps, &ob, "metrics", &mob, &present) != 0)
        return -1;
    if (present && parse_metrics(ps, &mob, m->metric, m->metric_given) != 0)
        return -1;
    if (parse_mig_more(ps, &ob, m) != 0)
        return -1;
    if (get_child(ps, &ob, "placement", &pob, &m->has_placement) != 0 ||
        get_u32(ps, &ob, "profile_id", 0, 1000, &m->profile_id) != 0)
        return -1;
    if (m->has_placement) {
        m->place_size = 1;
        if (check_keys(ps, &pob, place_keys) != 0 ||
            get_u32(ps, &pob, "start", 0, 7, &m->place_start) != 0 ||
            get_u32(ps, &pob, "size", 1, 8, &m->place_size) != 0)
            return -1;
        if (!jget(&pob, "start", NULL))
            return perr(ps, v, where, path, "placement: missing \"start\" (memory slice)");
        if (m->place_start + m->place_size > 8)
            return perr(ps, v, where, path, "placement: slices %u..%u past the 8th", m->place_start,
                        m->place_start + m->place_size - 1);
    }
    for (unsigned m2 = 0; m2 < GS_SIM_M__COUNT; m2++)
        if (!m->metric_given[m2])
            m->metric[m2] = gs_sim_pattern_const(0);
    for (unsigned k = 0; k < GS_SIM_MAX_MIG; k++) {
        const struct gs_sim_mig *o = &g->mig[k];
        if (k != slot && o->present && o->gi == m->gi && o->ci == m->ci)
            return perr(ps, v, where, path, "gi %u / ci %u is used twice", m->gi, m->ci);
    }
    return 0;
}

static int parse_mig(struct parse *ps, const struct jobj *gob, struct gs_sim_gpu *g)
{
    static const char *const keys[] = {"mode", "max_devices", "instances", NULL};
    static const struct name_val modes[] = {{"disabled", 0}, {"enabled", 1}, {NULL, 0}};
    struct jobj ob;
    const json_t *where, *inst;
    unsigned mode = 0;
    bool present;

    if (get_child(ps, gob, "mig", &ob, &present) != 0)
        return -1;
    if (!present)
        return 0;
    g->mig_capable = true;
    g->mig_max = 7;
    if (check_keys(ps, &ob, keys) != 0 ||
        get_enum(ps, &ob, "mode", modes, false, &mode, &present) != 0 ||
        get_u32(ps, &ob, "max_devices", 1, GS_SIM_MAX_MIG, &g->mig_max) != 0)
        return -1;
    g->mig_initially_on = mode == 1;
    inst = jget(&ob, "instances", &where);
    if (inst) {
        char path[256];
        path_join(path, sizeof path, ob.path, "instances");
        if (!json_is_array(inst))
            return perr(ps, inst, where, path, "expected an array");
        if (json_array_size(inst) > g->mig_max)
            return perr(ps, inst, where, path, "more instances than max_devices (%u)", g->mig_max);
        for (size_t i = 0; i < json_array_size(inst); i++) {
            char ipath[280];
            snprintf(ipath, sizeof ipath, "%s[%zu]", path, i);
            if (parse_mig_instance(ps, json_array_get(inst, i), inst, ipath, g, i) != 0)
                return -1;
        }
        for (unsigned k = g->mig_max; k < GS_SIM_MAX_MIG; k++)
            if (g->mig[k].present)
                return perr(ps, inst, where, path, "slot %u is beyond max_devices", k);
    }
    return 0;
}

/* Fills metrics the scenario leaves out with documented defaults derived from the statics. */
static void gpu_defaults(struct gs_sim_gpu *g)
{
    static const int clk_metric[4] = {GS_SIM_M_CLK_GRAPHICS, GS_SIM_M_CLK_SM, GS_SIM_M_CLK_MEM,
                                      GS_SIM_M_CLK_VIDEO};
    double dflt[GS_SIM_M__COUNT] = {0};

    dflt[GS_SIM_M_TEMP] = 35;
    dflt[GS_SIM_M_POWER] = g->has_power_limits ? g->power_default_mw / 1000.0 * 0.1 : 30;
    for (int i = 0; i < 4; i++)
        dflt[clk_metric[i]] = g->clock_max_mhz[i];
    dflt[GS_SIM_M_PCIE_GEN] = g->pcie_max_gen;
    dflt[GS_SIM_M_PCIE_WIDTH] = g->pcie_max_width;
    for (unsigned m = 0; m < GS_SIM_M__COUNT; m++) {
        if (g->metric_given[m])
            continue;
        if (m == GS_SIM_M_POWER_INSTANT)
            continue; /* copied from power below */
        if (m == GS_SIM_M_GPM_GRAPHICS && g->metric_given[GS_SIM_M_UTIL_GPU]) {
            g->metric[m] = g->metric[GS_SIM_M_UTIL_GPU];
            continue;
        }
        g->metric[m] = gs_sim_pattern_const(dflt[m]);
    }
    if (!g->metric_given[GS_SIM_M_POWER_INSTANT])
        g->metric[GS_SIM_M_POWER_INSTANT] = g->metric[GS_SIM_M_POWER];
}

static int parse_gpu(struct parse *ps, const json_t *v, const json_t *where, unsigned idx,
                     struct gs_sim_gpu *g)
{
    static const char *const keys[] = {"template",
                                       "name",
                                       "uuid",
                                       "serial",
                                       "vbios",
                                       "pci",
                                       "minor",
                                       "architecture",
                                       "brand",
                                       "compute_capability",
                                       "memory",
                                       "thresholds_c",
                                       "power",
                                       "clocks_max_mhz",
                                       "pcie",
                                       "persistence_mode",
                                       "compute_mode",
                                       "ecc",
                                       "retired_pages",
                                       "remapped_rows",
                                       "inforom",
                                       "display",
                                       "accounting",
                                       "gsp_firmware",
                                       "gsp_firmware_version",
                                       "board",
                                       "addressing_mode",
                                       "virtualization_mode",
                                       "host_vgpu_mode",
                                       "recovery_action",
                                       "c2c_mode",
                                       "egm",
                                       "sram_ecc",
                                       "fabric",
                                       "tlimit_thresholds_c",
                                       "edpp_multiplier_pct",
                                       "pdi",
                                       "module_id",
                                       "gpu_operation_mode",
                                       "vgpu_heterogeneous_mode",
                                       "pcie_atomics",
                                       "protected_memory",
                                       "unrepairable_memory",
                                       "topology",
                                       "clocks_event_reasons_supported",
                                       "idle_reason",
                                       "gpm",
                                       "accessible",
                                       "utilization_window_ms",
                                       "power_window_ms",
                                       "sample_interval_ms",
                                       "encoder_sampling_period_us",
                                       "pcie_throughput_delay_ms",
                                       "mig",
                                       "nvlink",
                                       "errors",
                                       "not_supported",
                                       "metrics",
                                       "description",
                                       NULL};
    static const char *const mem_keys[] = {
        "total_mib",        "total_bytes", "reserved_mib", "reserved_bytes", "bar1_total_mib",
        "bar1_total_bytes", NULL};
    struct jobj ob, sub;
    char path[64];
    bool present;
    double d;
    unsigned long long u;

    snprintf(path, sizeof path, "gpus[%u]", idx);
    if (!json_is_object(v))
        return perr(ps, v, where, path, "expected an object");
    jobj_one(&ob, v, path);
    {
        const json_t *tn = json_object_get(v, "template");
        if (tn) {
            const json_t *t = json_is_string(tn) && ps->templates
                                  ? json_object_get(ps->templates, json_string_value(tn))
                                  : NULL;
            if (!t || !json_is_object(t))
                return perr(ps, tn, v, path, "template is not the name of a \"templates\" entry");
            if (json_object_get(t, "template"))
                return perr(ps, json_object_get(t, "template"), t, path,
                            "templates cannot themselves use a template");
            ob.o[1] = t;
            ob.n = 2;
        }
    }
    if (check_keys(ps, &ob, keys) != 0)
        return -1;
    if (get_str(ps, &ob, "name", g->name, sizeof g->name, &present) != 0)
        return -1;
    if (!present || !g->name[0])
        return perr(ps, v, where, path, "missing \"name\"");
    if (get_str(ps, &ob, "uuid", g->uuid, sizeof g->uuid, &present) != 0)
        return -1;
    if (!present || !g->uuid[0])
        return perr(ps, v, where, path, "missing \"uuid\"");
    if (get_str(ps, &ob, "serial", g->serial, sizeof g->serial, &g->has_serial) != 0 ||
        get_str(ps, &ob, "vbios", g->vbios, sizeof g->vbios, &present) != 0)
        return -1;
    if (!present)
        snprintf(g->vbios, sizeof g->vbios, "00.00.00.00.00");
    g->arch = NVML_DEVICE_ARCH_UNKNOWN;
    g->brand = 0;
    if (get_enum(ps, &ob, "architecture", arch_names, true, &g->arch, &present) != 0 ||
        get_enum(ps, &ob, "brand", brand_names, true, &g->brand, &present) != 0 ||
        parse_pci(ps, &ob, g) != 0 || get_u32(ps, &ob, "minor", 0, 255, &g->minor) != 0)
        return -1;
    g->minor = jget(&ob, "minor", NULL) ? g->minor : idx;
    {
        const json_t *cw;
        const json_t *cc = jget(&ob, "compute_capability", &cw);
        char cpath[96];
        path_join(cpath, sizeof cpath, path, "compute_capability");
        g->cc_major = g->cc_minor = -1;
        if (cc) {
            const char *s = json_string_value(cc);
            int a, b, n = 0;
            if (!s || sscanf(s, "%d.%d%n", &a, &b, &n) != 2 || s[n] || a < 0 || a > 99 || b < 0 ||
                b > 99)
                return perr(ps, cc, cw, cpath, "expected \"major.minor\", e.g. \"9.0\"");
            g->cc_major = a;
            g->cc_minor = b;
        }
    }
    if (get_child(ps, &ob, "memory", &sub, &present) != 0)
        return -1;
    if (!present)
        return perr(ps, v, where, path, "missing \"memory\"");
    if (check_keys(ps, &sub, mem_keys) != 0 ||
        get_size(ps, &sub, "total", &g->mem_total_bytes, &present) != 0)
        return -1;
    if (!present)
        return perr(ps, sub.o[0], NULL, sub.path, "missing total_mib");
    if (get_size(ps, &sub, "reserved", &g->mem_reserved_bytes, &present) != 0 ||
        get_size(ps, &sub, "bar1_total", &g->bar1_total_bytes, &present) != 0)
        return -1;
    if (g->mem_reserved_bytes > g->mem_total_bytes)
        return perr(ps, sub.o[0], NULL, sub.path, "reserved exceeds total");
    if (!present)
        g->bar1_total_bytes = 256ull << 20;
    if (parse_thresholds(ps, &ob, g) != 0 || parse_power(ps, &ob, g) != 0 ||
        parse_clocks_pcie(ps, &ob, g) != 0 || parse_board(ps, &ob, g) != 0 ||
        parse_topology(ps, &ob, g) != 0 || parse_health(ps, &ob, g) != 0 ||
        parse_inforom(ps, &ob, g) != 0 || parse_modes(ps, &ob, g) != 0 ||
        parse_nvlink(ps, &ob, g) != 0 || parse_detail(ps, &ob, g) != 0 ||
        parse_detail_gpu(ps, &ob, g) != 0)
        return -1;
    g->persistence = false;
    g->compute_mode = NVML_COMPUTEMODE_DEFAULT;
    g->reasons_supported = 0x1FF;
    g->idle_reason = true;
    g->gpm = g->arch >= NVML_DEVICE_ARCH_HOPPER && g->arch != NVML_DEVICE_ARCH_UNKNOWN;
    g->accessible = true;
    if (get_bool(ps, &ob, "persistence_mode", &g->persistence) != 0 ||
        get_enum(ps, &ob, "compute_mode", compute_mode_names, true, &g->compute_mode, &present) !=
            0 ||
        get_uint(ps, &ob, "clocks_event_reasons_supported", 0, 0xFFFFFFFFull, &u, &present))
        return -1;
    if (present)
        g->reasons_supported = u;
    if (get_bool(ps, &ob, "idle_reason", &g->idle_reason) != 0 ||
        get_bool(ps, &ob, "gpm", &g->gpm) != 0 ||
        get_bool(ps, &ob, "accessible", &g->accessible) != 0)
        return -1;
    g->util_window_s = 1.0;
    g->power_window_s = 1.0;
    g->sample_interval_s = 1.0 / 6.0;
    g->enc_period_us = 167000;
    if (get_num(ps, &ob, "utilization_window_ms", 1, 60000, &d, &present) != 0)
        return -1;
    if (present)
        g->util_window_s = d / 1000;
    if (get_num(ps, &ob, "power_window_ms", 1, 60000, &d, &present) != 0)
        return -1;
    if (present)
        g->power_window_s = d / 1000;
    if (get_num(ps, &ob, "sample_interval_ms", 10, 60000, &d, &present) != 0)
        return -1;
    if (present)
        g->sample_interval_s = d / 1000;
    if (get_u32(ps, &ob, "encoder_sampling_period_us", 1, 60000000, &g->enc_period_us) != 0 ||
        get_num(ps, &ob, "pcie_throughput_delay_ms", 0, 10000, &d, &present) != 0)
        return -1;
    g->pcie_delay_ms = present ? d : -1; /* -1: the scenario-wide value */
    if (parse_mig(ps, &ob, g) != 0 ||
        parse_overrides(ps, &ob, g->override, &g->n_override, g) != 0 ||
        get_child(ps, &ob, "metrics", &sub, &present) != 0)
        return -1;
    if (present && parse_metrics(ps, &sub, g->metric, g->metric_given) != 0)
        return -1;
    gpu_defaults(g);
    return 0;
}

/* ---- processes ---------------------------------------------------------------------------- */

static int parse_proc_pid(struct parse *ps, const json_t *v, const json_t *where, const char *path,
                          struct gs_sim_proc *p)
{
    char ppath[256];

    path_join(ppath, sizeof ppath, path, "pid");
    if (!v)
        return perr(ps, where, NULL, path, "missing \"pid\"");
    if (json_is_string(v) && strcmp(json_string_value(v), "self") == 0) {
        p->pid_kind = GS_SIM_PID_SELF;
        return 0;
    }
    if (json_is_object(v)) {
        static const char *const keys[] = {"env", "default", NULL};
        struct jobj ob;
        unsigned long long u;
        bool present;
        jobj_one(&ob, v, ppath);
        p->pid_kind = GS_SIM_PID_ENV;
        if (check_keys(ps, &ob, keys) != 0 ||
            get_str(ps, &ob, "env", p->pid_env, sizeof p->pid_env, &present) != 0)
            return -1;
        if (!present || !p->pid_env[0])
            return perr(ps, v, where, ppath, "missing \"env\" (a variable name)");
        if (get_uint(ps, &ob, "default", 1, 0x7FFFFFFF, &u, &p->has_pid_default) != 0)
            return -1;
        p->pid = (unsigned)u;
        return 0;
    }
    {
        unsigned long long u;
        if (!json_is_integer(v))
            return perr(ps, v, where, ppath, "expected a number, \"self\" or {\"env\": NAME}");
        if (to_uint(ps, v, where, ppath, 1, 0x7FFFFFFF, &u) != 0)
            return -1;
        p->pid_kind = GS_SIM_PID_NUMBER;
        p->pid = (unsigned)u;
    }
    return 0;
}

static int parse_proc(struct parse *ps, const json_t *v, const json_t *where, unsigned idx,
                      struct gs_sim_proc *p)
{
    static const char *const keys[] = {"id",           "pid",
                                       "gpu",          "type",
                                       "name",         "used_memory_mib",
                                       "sm_util_pct",  "mem_util_pct",
                                       "enc_util_pct", "dec_util_pct",
                                       "mig",          "start_s",
                                       "exit_s",       NULL};
    static const char *const util_key[4] = {"sm_util_pct", "mem_util_pct", "enc_util_pct",
                                            "dec_util_pct"};
    struct gs_sim_pattern *util[4] = {&p->sm_pct, &p->mem_pct, &p->enc_pct, &p->dec_pct};
    const struct gs_sim_scenario *sc = ps->sc;
    struct jobj ob, mob;
    char path[64], fpath[256];
    bool present;
    const json_t *mv;

    snprintf(path, sizeof path, "processes[%u]", idx);
    if (!json_is_object(v))
        return perr(ps, v, where, path, "expected an object");
    jobj_one(&ob, v, path);
    if (check_keys(ps, &ob, keys) != 0 ||
        get_str(ps, &ob, "id", p->id, sizeof p->id, &present) != 0 ||
        parse_proc_pid(ps, json_object_get(v, "pid"), v, path, p) != 0 ||
        get_u32(ps, &ob, "gpu", 0, 0xFFFFFFFFu, &p->gpu) != 0)
        return -1;
    if (!json_object_get(v, "gpu"))
        return perr(ps, v, where, path, "missing \"gpu\" (an index into gpus)");
    if (p->gpu >= sc->n_gpus)
        return perr(ps, json_object_get(v, "gpu"), v, path, "no GPU with index %u", p->gpu);
    p->type = GS_SIM_PROC_COMPUTE;
    if (get_enum(ps, &ob, "type", proc_type_names, false, &p->type, &present) != 0 ||
        get_str(ps, &ob, "name", p->name, sizeof p->name, &present) != 0)
        return -1;
    p->mem_mib = gs_sim_pattern_const(0);
    mv = json_object_get(v, "used_memory_mib");
    path_join(fpath, sizeof fpath, path, "used_memory_mib");
    if (json_is_string(mv) && strcmp(json_string_value(mv), "unknown") == 0)
        p->mem_unknown = true;
    else if (mv && parse_pattern(ps, mv, v, fpath, &p->mem_mib) != 0)
        return -1;
    for (int i = 0; i < 4; i++) {
        const json_t *uv = json_object_get(v, util_key[i]);
        *util[i] = gs_sim_pattern_const(0);
        path_join(fpath, sizeof fpath, path, util_key[i]);
        if (uv && parse_pattern(ps, uv, v, fpath, util[i]) != 0)
            return -1;
    }
    p->mig_gi = p->mig_ci = -1;
    if (get_child(ps, &ob, "mig", &mob, &present) != 0)
        return -1;
    if (present) {
        static const char *const mk[] = {"gi", "ci", NULL};
        const struct gs_sim_gpu *g = &sc->gpus[p->gpu];
        unsigned gi = 0, ci = 0;
        bool found = false;
        if (check_keys(ps, &mob, mk) != 0 || get_u32(ps, &mob, "gi", 0, 1000, &gi) != 0 ||
            get_u32(ps, &mob, "ci", 0, 1000, &ci) != 0)
            return -1;
        for (unsigned k = 0; k < GS_SIM_MAX_MIG; k++)
            found |= g->mig[k].present && g->mig[k].gi == gi && g->mig[k].ci == ci;
        if (!found)
            return perr(ps, mob.o[0], NULL, mob.path, "gpu %u has no MIG instance gi %u ci %u",
                        p->gpu, gi, ci);
        p->mig_gi = (int)gi;
        p->mig_ci = (int)ci;
    }
    p->start_s = 0;
    p->exit_s = INFINITY;
    if (get_num(ps, &ob, "start_s", -1e9, 1e12, &p->start_s, &present) != 0 ||
        get_num(ps, &ob, "exit_s", -1e9, 1e12, &p->exit_s, &present) != 0)
        return -1;
    return 0;
}

/* ---- events ------------------------------------------------------------------------------- */

static int find_proc(const struct gs_sim_scenario *sc, const char *id)
{
    for (unsigned i = 0; i < sc->n_procs; i++)
        if (sc->procs[i].id[0] && strcmp(sc->procs[i].id, id) == 0)
            return (int)i;
    return -1;
}

static int parse_event(struct parse *ps, const json_t *v, const json_t *where, unsigned idx,
                       struct gs_sim_event *e)
{
    static const char *const keys[] = {"at_s",        "type",  "gpu",      "xid",   "reasons",
                                       "mig",         "error", "location", "count", "process",
                                       "description", "link",  NULL};
    struct gs_sim_scenario *sc = ps->sc;
    struct jobj ob, mob;
    char path[64];
    unsigned kind = 0;
    bool present;
    unsigned long long u;

    snprintf(path, sizeof path, "events[%u]", idx);
    if (!json_is_object(v))
        return perr(ps, v, where, path, "expected an object");
    jobj_one(&ob, v, path);
    if (check_keys(ps, &ob, keys) != 0 ||
        get_num(ps, &ob, "at_s", 0, 1e12, &e->at_s, &present) != 0)
        return -1;
    if (!present)
        return perr(ps, v, where, path, "missing \"at_s\"");
    if (get_enum(ps, &ob, "type", event_names, false, &kind, &present) != 0)
        return -1;
    if (!present)
        return perr(ps, v, where, path, "missing \"type\"");
    e->kind = (enum gs_sim_event_kind)kind;
    e->gi = e->ci = -1;
    if (kind == GS_SIM_EV_PROCESS_START || kind == GS_SIM_EV_PROCESS_EXIT) {
        char id[64];
        int pi;
        if (get_str(ps, &ob, "process", id, sizeof id, &present) != 0)
            return -1;
        if (!present)
            return perr(ps, v, where, path, "missing \"process\" (a process id)");
        pi = find_proc(sc, id);
        if (pi < 0)
            return perr(ps, json_object_get(v, "process"), v, path, "no process with id \"%s\"",
                        id);
        if (kind == GS_SIM_EV_PROCESS_START)
            sc->procs[pi].start_s = e->at_s;
        else
            sc->procs[pi].exit_s = e->at_s;
        return 0;
    }
    if (get_u32(ps, &ob, "gpu", 0, 0xFFFFFFFFu, &e->gpu) != 0)
        return -1;
    if (!json_object_get(v, "gpu"))
        return perr(ps, v, where, path, "missing \"gpu\"");
    if (e->gpu >= sc->n_gpus)
        return perr(ps, json_object_get(v, "gpu"), v, path, "no GPU with index %u", e->gpu);
    switch (kind) {
    case GS_SIM_EV_XID:
    case GS_SIM_EV_GPU_LOST:
        if (get_uint(ps, &ob, "xid", 1, 0xFFFFFFFFull, &u, &present) != 0)
            return -1;
        if (kind == GS_SIM_EV_XID && !present)
            return perr(ps, v, where, path, "missing \"xid\"");
        e->data = present ? u : 0;
        if (get_child(ps, &ob, "mig", &mob, &present) != 0)
            return -1;
        if (present) {
            static const char *const mk[] = {"gi", "ci", NULL};
            unsigned gi = 0, ci = 0;
            if (check_keys(ps, &mob, mk) != 0 || get_u32(ps, &mob, "gi", 0, 1000, &gi) != 0 ||
                get_u32(ps, &mob, "ci", 0, 1000, &ci) != 0)
                return -1;
            e->gi = (int)gi;
            e->ci = (int)ci;
        }
        break;
    case GS_SIM_EV_THROTTLE_ON:
    case GS_SIM_EV_THROTTLE_OFF: {
        const json_t *r = json_object_get(v, "reasons");
        char rpath[96];
        path_join(rpath, sizeof rpath, path, "reasons");
        if (!r)
            return perr(ps, v, where, path, "missing \"reasons\"");
        if (json_is_array(r)) {
            for (size_t i = 0; i < json_array_size(r); i++) {
                if (to_enum(ps, json_array_get(r, i), r, rpath, reason_names, false, &u) != 0)
                    return -1;
                e->data |= u;
            }
        } else if (to_uint(ps, r, v, rpath, 0, 0xFFFFFFFFFFFFull, &e->data) != 0) {
            return -1;
        }
        break;
    }
    case GS_SIM_EV_MIG_ENABLE:
    case GS_SIM_EV_MIG_DISABLE:
        if (!sc->gpus[e->gpu].mig_capable)
            return perr(ps, v, where, path, "gpu %u has no \"mig\" section", e->gpu);
        break;
    case GS_SIM_EV_ECC_ERROR: {
        unsigned type = 0, loc = 2;
        if (!sc->gpus[e->gpu].has_ecc)
            return perr(ps, v, where, path, "gpu %u has no \"ecc\" section", e->gpu);
        if (get_enum(ps, &ob, "error", ecc_type_names, false, &type, &present) != 0 ||
            get_enum(ps, &ob, "location", location_names, false, &loc, &present) != 0)
            return -1;
        e->ecc_type = type;
        e->ecc_location = loc;
        e->count = 1;
        if (get_uint(ps, &ob, "count", 1, 1ull << 40, &e->count, &present) != 0)
            return -1;
        break;
    }
    case GS_SIM_EV_NVLINK_DOWN:
    case GS_SIM_EV_NVLINK_UP: {
        unsigned n = sc->gpus[e->gpu].nvlink.n_links;
        if (n == 0)
            return perr(ps, v, where, path, "gpu %u has no \"nvlink\" links", e->gpu);
        if (get_uint(ps, &ob, "link", 0, n - 1, &e->data, &present) != 0)
            return -1;
        if (!present)
            return perr(ps, v, where, path, "missing \"link\"");
        break;
    }
    default:
        break;
    }
    return 0;
}

struct ev_sort {
    struct gs_sim_event e;
    unsigned idx;
};

static int ev_cmp(const void *a, const void *b)
{
    const struct ev_sort *x = a, *y = b;

    if (x->e.at_s != y->e.at_s)
        return x->e.at_s < y->e.at_s ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static int sort_events(struct gs_sim_scenario *sc)
{
    struct ev_sort *tmp;
    unsigned n = 0;

    if (sc->n_events == 0)
        return 0;
    tmp = malloc(sc->n_events * sizeof *tmp);
    if (!tmp)
        return -1;
    /* Process start/exit events were folded into their process; drop them here. */
    for (unsigned i = 0; i < sc->n_events; i++) {
        enum gs_sim_event_kind k = sc->events[i].kind;
        if (k == GS_SIM_EV_PROCESS_START || k == GS_SIM_EV_PROCESS_EXIT)
            continue;
        tmp[n].e = sc->events[i];
        tmp[n].idx = i;
        n++;
    }
    qsort(tmp, n, sizeof *tmp, ev_cmp);
    for (unsigned i = 0; i < n; i++)
        sc->events[i] = tmp[i].e;
    sc->n_events = n;
    free(tmp);
    return 0;
}

/* ---- top level ---------------------------------------------------------------------------- */

/* NVML_API_VERSION by driver release (reference §0): 8, 10, 11, 12, 13. */
static int api_version_for(const char *driver)
{
    int major = atoi(driver), minor = 0;
    const char *dot = strchr(driver, '.');

    if (dot)
        minor = atoi(dot + 1);
    if (major >= 580)
        return 13;
    if (major > 525 || (major == 525 && minor >= 60))
        return 12;
    if (major >= 450)
        return 11;
    if (major >= 415)
        return 10;
    return 8;
}

/* A plausible CUDA version for a driver branch when the scenario gives none. */
static int cuda_for(const char *driver)
{
    static const int tab[][2] = {
        {590, 13010}, {580, 13000}, {575, 12090}, {570, 12080}, {560, 12060}, {550, 12040},
        {545, 12030}, {535, 12020}, {525, 12000}, {520, 11080}, {515, 11070}, {510, 11060},
        {495, 11050}, {470, 11040}, {465, 11030}, {460, 11020}, {455, 11010}, {450, 11000},
        {440, 10020}, {418, 10010}, {410, 10000}};
    int major = atoi(driver);

    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++)
        if (major >= tab[i][0])
            return tab[i][1];
    return 9010;
}

static int parse_top(struct parse *ps, const json_t *root)
{
    static const char *const keys[] = {"scenario_version",
                                       "description",
                                       "driver_version",
                                       "nvml_version",
                                       "cuda_driver_version",
                                       "init_error",
                                       "privileged",
                                       "pcie_throughput_delay_ms",
                                       "errors",
                                       "not_supported",
                                       "templates",
                                       "gpus",
                                       "processes",
                                       "events",
                                       NULL};
    struct gs_sim_scenario *sc = ps->sc;
    struct jobj ob;
    const json_t *v;
    bool present;
    double delay = 20;

    if (!json_is_object(root))
        return perr(ps, root, NULL, "", "the scenario must be a JSON object");
    jobj_one(&ob, root, "");
    if (check_keys(ps, &ob, keys) != 0)
        return -1;
    v = json_object_get(root, "scenario_version");
    if (v && (!json_is_integer(v) || json_integer_value(v) != 1))
        return perr(ps, v, root, "scenario_version", "only version 1 is understood");
    if (get_str(ps, &ob, "description", sc->description, sizeof sc->description, &present) ||
        get_str(ps, &ob, "driver_version", sc->driver_version, sizeof sc->driver_version, &present))
        return -1;
    if (!present)
        snprintf(sc->driver_version, sizeof sc->driver_version, "590.48.01");
    if (get_str(ps, &ob, "nvml_version", sc->nvml_version, sizeof sc->nvml_version, &present))
        return -1;
    if (!present)
        snprintf(sc->nvml_version, sizeof sc->nvml_version, "%d.%.70s",
                 api_version_for(sc->driver_version), sc->driver_version);
    sc->cuda_version = cuda_for(sc->driver_version);
    v = json_object_get(root, "cuda_driver_version");
    if (v) {
        int a, b, n = 0;
        if (json_is_integer(v) && json_integer_value(v) > 0 && json_integer_value(v) < 1000000)
            sc->cuda_version = (int)json_integer_value(v);
        else if (json_is_string(v) && sscanf(json_string_value(v), "%d.%d%n", &a, &b, &n) == 2 &&
                 !json_string_value(v)[n] && a >= 0 && a < 1000 && b >= 0 && b < 100)
            sc->cuda_version = a * 1000 + b * 10;
        else
            return perr(ps, v, root, "cuda_driver_version",
                        "expected \"major.minor\" (\"13.1\") or an integer (13010)");
    }
    v = json_object_get(root, "init_error");
    if (v && !json_is_null(v)) {
        int rc = json_is_string(v) ? gs_sim_rc_by_name(json_string_value(v)) : -1;
        if (rc <= 0)
            return perr(ps, v, root, "init_error", "expected an NVML error name");
        sc->init_error = rc;
    }
    sc->privileged = true;
    if (get_bool(ps, &ob, "privileged", &sc->privileged) != 0 ||
        get_num(ps, &ob, "pcie_throughput_delay_ms", 0, 10000, &delay, &present) != 0 ||
        parse_overrides(ps, &ob, sc->override, &sc->n_override, NULL) != 0)
        return -1;
    ps->templates = json_object_get(root, "templates");
    if (ps->templates && !json_is_object(ps->templates))
        return perr(ps, ps->templates, root, "templates", "expected an object of name: gpu");
    if (ps->templates && json_object_size(ps->templates) > GS_SIM_MAX_TEMPLATES)
        return perr(ps, ps->templates, root, "templates", "more than %u templates",
                    GS_SIM_MAX_TEMPLATES);

    v = json_object_get(root, "gpus");
    if (v) {
        size_t n = json_array_size(v);
        if (!json_is_array(v))
            return perr(ps, v, root, "gpus", "expected an array");
        if (n > GS_SIM_MAX_GPUS)
            return perr(ps, v, root, "gpus", "more than %u GPUs", GS_SIM_MAX_GPUS);
        sc->gpus = arena_alloc(sc, (n ? n : 1) * sizeof *sc->gpus);
        if (!sc->gpus)
            return perr(ps, v, root, "gpus", "out of memory");
        for (size_t i = 0; i < n; i++) {
            if (parse_gpu(ps, json_array_get(v, i), v, (unsigned)i, &sc->gpus[i]) != 0)
                return -1;
            if (sc->gpus[i].pcie_delay_ms < 0)
                sc->gpus[i].pcie_delay_ms = delay;
            for (size_t j = 0; j < i; j++) {
                if (strcmp(sc->gpus[j].uuid, sc->gpus[i].uuid) == 0)
                    return perr(ps, json_array_get(v, i), v, "gpus",
                                "gpus[%zu] repeats the uuid of gpus[%zu]", i, j);
                if (strcmp(sc->gpus[j].bus_id, sc->gpus[i].bus_id) == 0)
                    return perr(ps, json_array_get(v, i), v, "gpus",
                                "gpus[%zu] repeats the PCI bus id of gpus[%zu]", i, j);
            }
            sc->n_gpus = (unsigned)i + 1;
        }
    }
    v = json_object_get(root, "processes");
    if (v) {
        size_t n = json_array_size(v);
        if (!json_is_array(v))
            return perr(ps, v, root, "processes", "expected an array");
        if (n > GS_SIM_MAX_PROCS)
            return perr(ps, v, root, "processes", "more than %u processes", GS_SIM_MAX_PROCS);
        sc->procs = arena_alloc(sc, (n ? n : 1) * sizeof *sc->procs);
        if (!sc->procs)
            return perr(ps, v, root, "processes", "out of memory");
        for (size_t i = 0; i < n; i++) {
            if (parse_proc(ps, json_array_get(v, i), v, (unsigned)i, &sc->procs[i]) != 0)
                return -1;
            if (sc->procs[i].id[0] && find_proc(sc, sc->procs[i].id) >= 0)
                return perr(ps, json_array_get(v, i), v, "processes",
                            "processes[%zu] repeats id \"%s\"", i, sc->procs[i].id);
            sc->n_procs = (unsigned)i + 1;
        }
    }
    v = json_object_get(root, "events");
    if (v) {
        size_t n = json_array_size(v);
        if (!json_is_array(v))
            return perr(ps, v, root, "events", "expected an array");
        if (n > GS_SIM_MAX_EVENTS)
            return perr(ps, v, root, "events", "more than %u events", GS_SIM_MAX_EVENTS);
        sc->events = arena_alloc(sc, (n ? n : 1) * sizeof *sc->events);
        if (!sc->events)
            return perr(ps, v, root, "events", "out of memory");
        for (size_t i = 0; i < n; i++) {
            if (parse_event(ps, json_array_get(v, i), v, (unsigned)i, &sc->events[i]) != 0)
                return -1;
            sc->n_events = (unsigned)i + 1;
        }
        if (sort_events(sc) != 0)
            return perr(ps, v, root, "events", "out of memory");
    }
    return 0;
}

int gs_sim_scenario_parse(const char *buf, size_t len, const char *origin,
                          struct gs_sim_scenario **out, char *err, size_t err_len)
{
    struct parse ps = {0};
    json_error_t jerr;
    json_t *root = NULL;
    size_t where = 0;
    char dummy[1];
    int rc = -1;

    if (!err || err_len == 0) {
        err = dummy;
        err_len = sizeof dummy;
    }
    err[0] = '\0';
    ps.origin = origin ? origin : "scenario";
    ps.text = buf;
    ps.len = len;
    ps.err = err;
    ps.err_len = err_len;
    if (!out)
        return -1;
    *out = NULL;
    if (!buf || len > GS_SIM_MAX_SCENARIO_BYTES) {
        snprintf(err, err_len, "%s: scenario larger than %u bytes", ps.origin,
                 GS_SIM_MAX_SCENARIO_BYTES);
        return -1;
    }
    if (text_depth(buf, len, &where) > GS_SIM_MAX_NESTING) {
        unsigned line = 1, col = 1;
        for (size_t i = 0; i < where; i++) {
            if (buf[i] == '\n') {
                line++;
                col = 1;
            } else if (((unsigned char)buf[i] & 0xC0) != 0x80) {
                col++;
            }
        }
        snprintf(err, err_len, "%s:%u:%u: nesting deeper than %u levels", ps.origin, line, col,
                 GS_SIM_MAX_NESTING);
        return -1;
    }
    root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        snprintf(err, err_len, "%s:%d:%d: %s", ps.origin, jerr.line, jerr.column, jerr.text);
        return -1;
    }
    {
        struct cursor c = {buf, len, 0, 1, 1};
        ps.pos_ok = walk(&ps, &c, root, 0);
        if (ps.pos_ok)
            qsort(ps.pos, ps.n_pos, sizeof *ps.pos, pos_cmp);
    }
    ps.sc = calloc(1, sizeof *ps.sc);
    if (!ps.sc) {
        snprintf(err, err_len, "%s: out of memory", ps.origin);
        goto done;
    }
    if (parse_top(&ps, root) != 0)
        goto done;
    *out = ps.sc;
    ps.sc = NULL;
    rc = 0;
done:
    gs_sim_scenario_free(ps.sc);
    free(ps.pos);
    json_decref(root);
    return rc;
}

int gs_sim_scenario_load(const char *path, struct gs_sim_scenario **out, char *err, size_t err_len)
{
    FILE *f;
    char *buf;
    size_t n;
    int rc;

    *out = NULL;
    f = fopen(path, "rb");
    if (!f) {
        snprintf(err, err_len, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    buf = malloc(GS_SIM_MAX_SCENARIO_BYTES + 1);
    if (!buf) {
        fclose(f);
        snprintf(err, err_len, "%s: out of memory", path);
        return -1;
    }
    n = fread(buf, 1, GS_SIM_MAX_SCENARIO_BYTES + 1, f);
    if (ferror(f)) {
        snprintf(err, err_len, "%s: read error", path);
        rc = -1;
    } else if (n > GS_SIM_MAX_SCENARIO_BYTES) {
        snprintf(err, err_len, "%s: larger than %u bytes", path, GS_SIM_MAX_SCENARIO_BYTES);
        rc = -1;
    } else {
        rc = gs_sim_scenario_parse(buf, n, path, out, err, err_len);
    }
    free(buf);
    fclose(f);
    return rc;
}

int gs_sim_scenario_resolve(struct gs_sim_scenario *sc, char *err, size_t err_len)
{
    for (unsigned i = 0; i < sc->n_procs; i++) {
        struct gs_sim_proc *p = &sc->procs[i];
        if (p->pid_kind == GS_SIM_PID_SELF) {
            p->pid = (unsigned)getpid();
        } else if (p->pid_kind == GS_SIM_PID_ENV) {
            const char *s = getenv(p->pid_env);
            char *end = NULL;
            unsigned long v = 0;
            if (s && *s) {
                errno = 0;
                v = strtoul(s, &end, 10);
            }
            if (s && *s && !errno && !*end && v > 0 && v <= 0x7FFFFFFFul) {
                p->pid = (unsigned)v;
            } else if (!p->has_pid_default) {
                snprintf(err, err_len,
                         "processes[%u]: environment variable %s is %s and no default is given", i,
                         p->pid_env, s ? "not a pid" : "not set");
                return -1;
            }
        }
    }
    return 0;
}
