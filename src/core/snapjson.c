/*
 * The snapshot codec (snapjson.h): encode a snapshot to the public snapshot document and to
 * the flat processes document, and decode the snapshot document back. The key tables below
 * (text fields, ECC locations, job runtimes, process types) serve both directions, so a field
 * renamed for one is renamed for the other.
 */
#include "core/snapjson.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpuscope/gs_err.h"

#define NO_INSTANCE 0xFFFFFFFFu
/* What a decoded document may hold: far beyond any node, small enough to allocate. */
#define DECODE_GPUS_MAX 1024u
#define DECODE_PROCS_MAX 65536u

/* json_object_set_new that remembers a failure instead of checking every call. */
struct jb {
    int failed;
};

static void put(struct jb *jb, json_t *obj, const char *key, json_t *v)
{
    if (!v || json_object_set_new(obj, key, v) != 0)
        jb->failed = 1;
}

static void append(struct jb *jb, json_t *arr, json_t *v)
{
    if (!v || json_array_append_new(arr, v) != 0)
        jb->failed = 1;
}

/* Length of the valid UTF-8 sequence at s (n bytes left), or 0 when it is not valid UTF-8:
 * a stray continuation byte, a truncated sequence, an overlong form or a surrogate. */
static size_t utf8_valid_len(const unsigned char *s, size_t n)
{
    unsigned cp;
    size_t len;

    if (s[0] < 0x80)
        return 1;
    if (s[0] >= 0xc2 && s[0] <= 0xdf)
        len = 2, cp = s[0] & 0x1f;
    else if (s[0] >= 0xe0 && s[0] <= 0xef)
        len = 3, cp = s[0] & 0x0f;
    else if (s[0] >= 0xf0 && s[0] <= 0xf4)
        len = 4, cp = s[0] & 0x07;
    else
        return 0;
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

/* A JSON string of s, with bytes that are not valid UTF-8 replaced by '?' (a process name or
 * command line can hold anything); null when !ok. The model bounds every string we emit. */
static json_t *str_or_null(int ok, const char *s)
{
    char buf[1024];
    size_t n, i = 0, o = 0;

    if (!ok || !s)
        return json_null();
    n = strnlen(s, sizeof buf - 1);
    while (i < n) {
        size_t l = utf8_valid_len((const unsigned char *)s + i, n - i);
        if (l == 0) {
            buf[o++] = '?';
            i++;
            continue;
        }
        memcpy(buf + o, s + i, l);
        o += l;
        i += l;
    }
    return json_stringn(buf, o);
}

/* Ratios, watts, joules and seconds are always reals; counts, bytes, hertz and masks are
 * integers when they are whole. */
static json_t *number(double v, const char *unit)
{
    int real = strcmp(unit, "ratio") == 0 || strcmp(unit, "watts") == 0 ||
               strcmp(unit, "joules") == 0 || strcmp(unit, "seconds") == 0;

    if (!isfinite(v))
        return json_null();
    if (!real && v == floor(v) && fabs(v) < 9007199254740992.0)
        return json_integer((json_int_t)v);
    return json_real(v);
}

static const char *status_name(unsigned st)
{
    switch (st) {
    case GS_ST_NOPERM:
        return "no_permission";
    case GS_ST_ERROR:
        return "error";
    case GS_ST_LOST:
        return "gpu_lost";
    }
    return NULL;
}

/* "2025-01-14T10:22:03.123+01:00" in local time. */
static json_t *iso_time(double t)
{
    time_t sec = (time_t)floor(t);
    int ms = (int)((t - floor(t)) * 1000.0);
    struct tm tm;
    char buf[64];
    size_t n;
    long off;

    if (t <= 0 || !localtime_r(&sec, &tm))
        return json_null();
    n = strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
    off = tm.tm_gmtoff / 60;
    snprintf(buf + n, sizeof buf - n, ".%03d%c%02ld:%02ld", ms > 999 ? 999 : ms,
             off < 0 ? '-' : '+', labs(off) / 60, labs(off) % 60);
    return json_string(buf);
}

static json_t *throttle_names(struct jb *jb, const struct gs_gpu *g)
{
    uint64_t mask;
    json_t *arr;

    if (!gs_gpu_has(g, GS_M_THROTTLE_ACTIVE))
        return json_null();
    mask = gs_gpu_mask(g, GS_M_THROTTLE_ACTIVE);
    arr = json_array();
    for (unsigned bit = 0; arr && bit < 64; bit++) {
        const char *name;
        if (!(mask & (1ULL << bit)))
            continue;
        name = gs_throttle_name(1ULL << bit);
        if (name)
            append(jb, arr, json_string(name));
        else
            append(jb, arr, json_sprintf("0x%llx", 1ULL << bit));
    }
    return arr;
}

/* The document's key of each ECC location and text field, in both directions. */
static const char *const ecc_keys[GS_ECC_LOCATIONS] = {
    "l1_cache", "l2_cache", "dram", "register_file", "texture", "texture_shared", "cbu", "sram",
};

/* {"corrected_volatile": {"dram": 0, ...}, ...} with only the counters that were read;
 * null when none was. */
static json_t *ecc_by_location(struct jb *jb, const struct gs_gpu *g)
{
    static const char *const kinds[2][2] = {
        {"corrected_volatile", "corrected_aggregate"},
        {"uncorrected_volatile", "uncorrected_aggregate"},
    };
    json_t *obj = json_object();
    int any = 0;

    for (int t = 0; obj && t < 2; t++)
        for (int c = 0; c < 2; c++) {
            json_t *locs = NULL;
            for (int l = 0; l < GS_ECC_LOCATIONS; l++) {
                if (g->ecc_loc_st[t][c][l] != GS_ST_OK)
                    continue;
                if (!locs)
                    locs = json_object();
                if (locs)
                    put(jb, locs, ecc_keys[l], json_integer((json_int_t)g->ecc_loc[t][c][l]));
            }
            if (locs) {
                put(jb, obj, kinds[t][c], locs);
                any = 1;
            }
        }
    if (!any) {
        json_decref(obj);
        return json_null();
    }
    return obj;
}

/* A MIG device's profile, BAR1 share, engine counts, GPM figures and why it has no
 * utilization (NVML reports none per MIG device, nor for a GPU in MIG mode). */
static void mig_more_json(struct jb *jb, json_t *o, const struct gs_mig *m)
{
    const char *prof = gs_mig_profile(m);
    int b1 = m->bar1_st == GS_ST_OK, at = m->attr_st == GS_ST_OK;
    json_t *unavail = json_object();

    put(jb, o, "profile", str_or_null(prof[0] != '\0', prof));
    put(jb, o, "bar1_total", b1 ? json_integer((json_int_t)m->bar1_total_bytes) : json_null());
    put(jb, o, "bar1_used", b1 ? json_integer((json_int_t)m->bar1_used_bytes) : json_null());
    put(jb, o, "sm_count", at ? json_integer(m->sm_count) : json_null());
    put(jb, o, "copy_engine_count", at ? json_integer(m->ce_count) : json_null());
    put(jb, o, "encoder_count", at ? json_integer(m->enc_count) : json_null());
    put(jb, o, "decoder_count", at ? json_integer(m->dec_count) : json_null());
    put(jb, o, "jpeg_count", at ? json_integer(m->jpg_count) : json_null());
    put(jb, o, "ofa_count", at ? json_integer(m->ofa_count) : json_null());
    put(jb, o, "utilization_gpu", json_null());
    for (int k = 0; k < GS_MIG_GPM__COUNT; k++)
        put(jb, o, gs_metric_name(gs_mig_gpm_metric((enum gs_mig_gpm)k)),
            m->gpm_st[k] == GS_ST_OK && isfinite(m->gpm[k]) ? json_real(m->gpm[k]) : json_null());
    put(jb, o, "placement",
        m->place_st == GS_ST_OK ? json_pack("{s:I, s:I}", "start", (json_int_t)m->place_start,
                                            "size", (json_int_t)m->place_size)
                                : json_null());
    put(jb, o, "profile_id", m->place_st == GS_ST_OK ? json_integer(m->profile_id) : json_null());
    if (unavail)
        put(jb, unavail, "utilization_gpu", json_string("mig_mode"));
    if (unavail && status_name(m->place_st))
        put(jb, unavail, "placement", json_string(status_name(m->place_st)));
    put(jb, o, "unavailable", unavail);
}

static json_t *mig_json(struct jb *jb, const struct gs_mig *m)
{
    json_t *o = json_object();
    int ok = m->mem_st == GS_ST_OK;

    if (!o)
        return NULL;
    put(jb, o, "index", json_integer(m->index));
    put(jb, o, "gi_id", json_integer(m->gi_id));
    put(jb, o, "ci_id", json_integer(m->ci_id));
    put(jb, o, "uuid", str_or_null(m->uuid[0] != '\0', m->uuid));
    put(jb, o, "name", str_or_null(m->name[0] != '\0', m->name));
    put(jb, o, "memory_total", ok ? json_integer((json_int_t)m->mem_total_bytes) : json_null());
    put(jb, o, "memory_used", ok ? json_integer((json_int_t)m->mem_used_bytes) : json_null());
    put(jb, o, "memory_free", ok ? json_integer((json_int_t)m->mem_free_bytes) : json_null());
    mig_more_json(jb, o, m);
    return o;
}

/* The processes of MIG device m on GPU gi (their gi_id and ci_id), as a list of pids. */
static json_t *mig_pids(struct jb *jb, const struct gs_snapshot *s, unsigned gi,
                        const struct gs_mig *m)
{
    json_t *arr = json_array();

    for (unsigned i = 0; arr && i < s->n_procs; i++) {
        const struct gs_proc *p = &s->procs[i];
        if (p->gpu == gi && p->gi_id == m->gi_id && p->ci_id == m->ci_id)
            append(jb, arr, json_integer(p->pid));
    }
    return arr;
}

static const char *job_runtime(unsigned kind)
{
    switch (kind) {
    case GS_JOB_DOCKER:
        return "docker";
    case GS_JOB_CONTAINERD:
        return "containerd";
    case GS_JOB_CRIO:
        return "cri-o";
    case GS_JOB_PODMAN:
        return "podman";
    }
    return NULL;
}

static json_t *proc_types(struct jb *jb, unsigned type)
{
    json_t *arr = json_array();

    if (arr && (type & GS_PROC_COMPUTE))
        append(jb, arr, json_string("compute"));
    if (arr && (type & GS_PROC_GRAPHICS))
        append(jb, arr, json_string("graphics"));
    if (arr && (type & GS_PROC_MPS))
        append(jb, arr, json_string("mps"));
    return arr;
}

/* {"name", "namespace", "container"}: the Kubernetes names of p's pod, or null. */
static json_t *pod_names_json(const struct gs_proc *p)
{
    if (!p->pod_name[0])
        return json_null();
    return json_pack("{s:o, s:o, s:o}", "name", str_or_null(1, p->pod_name), "namespace",
                     str_or_null(p->pod_namespace[0] != '\0', p->pod_namespace), "container",
                     str_or_null(p->pod_container[0] != '\0', p->pod_container));
}

static json_t *proc_json(struct jb *jb, const struct gs_proc *p)
{
    json_t *o = json_object();
    int host = p->host_st == GS_ST_OK;
    int util = p->util_st == GS_ST_OK;
    json_t *ctr = json_null();

    if (!o)
        return NULL;
    put(jb, o, "pid", json_integer(p->pid));
    put(jb, o, "type", proc_types(jb, p->type));
    put(jb, o, "gi_id", p->gi_id == NO_INSTANCE ? json_null() : json_integer(p->gi_id));
    put(jb, o, "ci_id", p->ci_id == NO_INSTANCE ? json_null() : json_integer(p->ci_id));
    put(jb, o, "gpu_memory",
        p->mem_st == GS_ST_OK ? json_integer((json_int_t)p->gpu_mem_bytes) : json_null());
    put(jb, o, "utilization_sm", util ? json_real(p->sm_util) : json_null());
    put(jb, o, "utilization_memory", util ? json_real(p->mem_util) : json_null());
    put(jb, o, "utilization_encoder", util ? json_real(p->enc_util) : json_null());
    put(jb, o, "utilization_decoder", util ? json_real(p->dec_util) : json_null());
    put(jb, o, "name", str_or_null(p->name[0] != '\0', p->name));
    put(jb, o, "command", str_or_null(host && p->cmdline[0], p->cmdline));
    put(jb, o, "user", str_or_null(host && p->user[0], p->user));
    put(jb, o, "uid", host ? json_integer(p->uid) : json_null());
    put(jb, o, "cpu_ratio", p->cpu_st == GS_ST_OK ? json_real(p->cpu_ratio) : json_null());
    put(jb, o, "memory_rss", host ? json_integer((json_int_t)p->rss_bytes) : json_null());
    put(jb, o, "start_time", host && p->start_time > 0 ? json_real(p->start_time) : json_null());
    if (p->container_id[0]) {
        const char *rt = job_runtime(p->job_kind);
        ctr = json_pack("{s:o, s:o}", "runtime", rt ? json_string(rt) : json_null(), "id",
                        str_or_null(1, p->container_id));
    }
    put(jb, o, "container", ctr);
    put(jb, o, "pod_uid", str_or_null(p->pod_uid[0] != '\0', p->pod_uid));
    put(jb, o, "slurm_job", str_or_null(p->slurm_job[0] != '\0', p->slurm_job));
    put(jb, o, "pod", pod_names_json(p));
    return o;
}

static const char *const text_keys[GS_T__COUNT] = {
    [GS_T_NAME] = "name",
    [GS_T_UUID] = "uuid",
    [GS_T_SERIAL] = "serial",
    [GS_T_PCI_BUS_ID] = "pci_bus_id",
    [GS_T_VBIOS] = "vbios_version",
    [GS_T_INFOROM_IMAGE] = "inforom_image",
    [GS_T_INFOROM_OEM] = "inforom_oem",
    [GS_T_INFOROM_ECC] = "inforom_ecc",
    [GS_T_INFOROM_PWR] = "inforom_power",
    [GS_T_BOARD_PART] = "board_part_number",
    [GS_T_GSP_VERSION] = "gsp_firmware_version",
    [GS_T_FABRIC_CLUSTER] = "fabric_cluster_uuid",
    [GS_T_PDI] = "pdi",
};

/* NVLink error counter keys, in enum gs_nvlink_err order (both directions). */
static const char *const nvlink_err_keys[GS_NVL_ERR__COUNT] = {
    "replay_errors", "recovery_errors", "crc_flit_errors", "crc_data_errors"};

/* One link: {"link", "active", "speed", "tx_bytes", "rx_bytes", "remote_pci_bus_id", errors...},
 * null for what was not read. */
static json_t *nvlink_json(struct jb *jb, const struct gs_nvlink *l, unsigned i)
{
    json_t *o = json_object();
    int tput = l->tput_st == GS_ST_OK;

    if (!o)
        return NULL;
    put(jb, o, "link", json_integer(i));
    put(jb, o, "active", json_boolean(l->active));
    put(jb, o, "speed",
        l->speed_st == GS_ST_OK ? number(l->speed_bps, "bytes_per_second") : json_null());
    put(jb, o, "tx_bytes", tput ? json_integer((json_int_t)l->tx_bytes) : json_null());
    put(jb, o, "rx_bytes", tput ? json_integer((json_int_t)l->rx_bytes) : json_null());
    put(jb, o, "remote_pci_bus_id", str_or_null(l->remote_st == GS_ST_OK, l->remote_bus_id));
    for (int e = 0; e < GS_NVL_ERR__COUNT; e++)
        put(jb, o, nvlink_err_keys[e],
            l->err_st[e] == GS_ST_OK ? json_integer((json_int_t)l->err[e]) : json_null());
    return o;
}

static json_t *nvlinks_json(struct jb *jb, const struct gs_gpu *g)
{
    json_t *arr = json_array();

    for (unsigned i = 0; arr && i < g->n_nvlink && i < GS_NVLINK_MAX; i++)
        append(jb, arr, nvlink_json(jb, &g->nvlink[i], i));
    return arr;
}

/* A counter of the document back: a non-negative integer below 2^63, else absent. */
static int u64_of(const json_t *v, uint64_t *out)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return 0;
    *out = (uint64_t)json_integer_value(v);
    return 1;
}

static void copy_str(char *dst, size_t len, const json_t *v);

static void nvlinks_from_json(struct gs_gpu *g, const json_t *arr)
{
    const json_t *o;
    size_t i;

    json_array_foreach(arr, i, o)
    {
        struct gs_nvlink *l;
        const json_t *v;
        if (g->n_nvlink >= GS_NVLINK_MAX || !json_is_object(o))
            break;
        l = &g->nvlink[g->n_nvlink++];
        l->active = json_is_true(json_object_get(o, "active"));
        v = json_object_get(o, "speed");
        if (json_is_number(v) && isfinite(json_number_value(v))) {
            l->speed_bps = json_number_value(v);
            l->speed_st = GS_ST_OK;
        }
        if (u64_of(json_object_get(o, "tx_bytes"), &l->tx_bytes) &&
            u64_of(json_object_get(o, "rx_bytes"), &l->rx_bytes))
            l->tput_st = GS_ST_OK;
        else
            l->tx_bytes = l->rx_bytes = 0;
        v = json_object_get(o, "remote_pci_bus_id");
        if (json_is_string(v)) {
            copy_str(l->remote_bus_id, sizeof l->remote_bus_id, v);
            l->remote_st = GS_ST_OK;
        }
        for (int e = 0; e < GS_NVL_ERR__COUNT; e++)
            if (u64_of(json_object_get(o, nvlink_err_keys[e]), &l->err[e]))
                l->err_st[e] = GS_ST_OK;
    }
}

/* {"count": N, "gpu_memory": bytes or null}: what a filter withheld of g's processes. */
static json_t *hidden_json(const struct gs_gpu *g)
{
    return json_pack("{s:I, s:o}", "count", (json_int_t)g->hidden_count, "gpu_memory",
                     g->hidden_mem_st == GS_ST_OK ? json_integer((json_int_t)g->hidden_mem_bytes)
                                                  : json_null());
}

static json_t *gpu_json(struct jb *jb, const struct gs_snapshot *s, unsigned gi,
                        const struct gs_snapjson_opts *o)
{
    const struct gs_gpu *g = &s->gpus[gi];
    json_t *obj = json_object(), *unavail = json_object(), *migs = json_array();

    if (!obj || !unavail || !migs) {
        json_decref(obj);
        json_decref(unavail);
        json_decref(migs);
        return NULL;
    }
    put(jb, obj, "index", json_integer(g->index));
    for (int t = 0; t < GS_T__COUNT; t++)
        put(jb, obj, text_keys[t], str_or_null(gs_gpu_has_text(g, (enum gs_text)t), g->text[t]));
    put(jb, obj, "lost", json_boolean(g->lost));
    for (int m = 0; m < GS_M__COUNT; m++) {
        const char *name = gs_metric_name((enum gs_metric)m);
        const char *why = status_name(g->st[m]);
        put(jb, obj, name,
            g->st[m] == GS_ST_OK ? number(g->v[m], gs_metric_unit((enum gs_metric)m))
                                 : json_null());
        if (why)
            put(jb, unavail, name, json_string(why));
    }
    /* In MIG mode NVML has no utilization of the whole GPU: say so rather than leave a gap. */
    for (int m = GS_M_UTIL_GPU; gs_gpu_mig_on(g) && m <= GS_M_UTIL_MEM; m++)
        if (g->st[m] == GS_ST_NA)
            put(jb, unavail, gs_metric_name((enum gs_metric)m), json_string("mig_mode"));
    put(jb, obj, "clocks_event_reasons", throttle_names(jb, g));
    put(jb, obj, "ecc_errors_by_location", ecc_by_location(jb, g));
    put(jb, obj, "unavailable", unavail);
    for (unsigned m = 0; m < g->n_mig && m < GS_MIG_MAX; m++)
        append(jb, migs, mig_json(jb, &g->mig[m]));
    for (unsigned m = 0; !o->no_procs && m < g->n_mig && m < GS_MIG_MAX; m++)
        put(jb, json_array_get(migs, m), "processes", mig_pids(jb, s, gi, &g->mig[m]));
    put(jb, obj, "mig_devices", migs);
    put(jb, obj, "nvlinks", nvlinks_json(jb, g));
    /* when the links' states were read: earlier than query_time when held (gs_sampler.h) */
    put(jb, obj, "nvlinks_state_time_unix",
        g->n_nvlink && g->nvlink_state_t > 0 ? json_real(g->nvlink_state_t) : json_null());
    if (!o->no_procs) {
        json_t *procs = json_array();
        for (unsigned i = 0; procs && i < s->n_procs; i++)
            if (s->procs[i].gpu == gi)
                append(jb, procs, proc_json(jb, &s->procs[i]));
        put(jb, obj, "processes", procs);
        if (g->hidden_st == GS_ST_OK)
            put(jb, obj, "hidden_processes", hidden_json(g));
    }
    return obj;
}

int gs_snapjson_encode(json_t **out, const struct gs_snapshot *s, const struct gs_snapjson_opts *o,
                       struct gs_err *err)
{
    static const struct gs_snapjson_opts none;
    struct jb jb = {0};
    const struct gs_system *sys = &s->sys;
    json_t *doc = json_object(), *gpus = json_array();

    if (!doc || !gpus) {
        json_decref(doc);
        json_decref(gpus);
        return gs_err_set(err, GS_ENOMEM, "json: out of memory");
    }
    put(&jb, doc, "hostname", str_or_null(sys->hostname[0] != '\0', sys->hostname));
    put(&jb, doc, "query_time", iso_time(s->t_real));
    put(&jb, doc, "query_time_unix", s->t_real > 0 ? json_real(s->t_real) : json_null());
    put(&jb, doc, "driver_version", str_or_null(sys->driver_st == GS_ST_OK, sys->driver_version));
    put(&jb, doc, "nvml_version", str_or_null(sys->nvml_st == GS_ST_OK, sys->nvml_version));
    put(&jb, doc, "cuda_version",
        sys->cuda_st == GS_ST_OK
            ? json_sprintf("%d.%d", sys->cuda_version / 1000, (sys->cuda_version % 1000) / 10)
            : json_null());
    put(&jb, doc, "simulated", json_boolean(sys->simulated));
    put(&jb, doc, "source", json_string(sys->source[0] ? sys->source : "nvml"));
    if (sys->simulated)
        put(&jb, doc, "simulator", json_string(sys->sim_info[0] ? sys->sim_info : "nvml-sim"));
    if (!o)
        o = &none;
    for (unsigned i = 0; i < s->n_gpus; i++)
        if (!o->gpu_selected || o->gpu_selected(o->ctx, &s->gpus[i]))
            append(&jb, gpus, gpu_json(&jb, s, i, o));
    put(&jb, doc, "gpus", gpus);
    if (jb.failed) {
        json_decref(doc);
        return gs_err_set(err, GS_ENOMEM, "json: out of memory");
    }
    *out = doc;
    return GS_OK;
}

/* {"gpu": index, "gpu_uuid": uuid or null} followed by the members of entry. */
static json_t *led_by_gpu(const struct gs_gpu *g, json_t *entry)
{
    json_t *e = json_pack("{s:I, s:o}", "gpu", (json_int_t)g->index, "gpu_uuid",
                          str_or_null(gs_gpu_has_text(g, GS_T_UUID), g->text[GS_T_UUID]));

    if (!entry || !e || json_object_update(e, entry) != 0) {
        json_decref(e);
        e = NULL;
    }
    json_decref(entry);
    return e;
}

int gs_snapjson_processes(json_t **out, const struct gs_snapshot *s, bool hidden_list,
                          struct gs_err *err)
{
    struct jb jb = {0};
    json_t *doc = json_object(), *list = json_array(), *hidden = json_array();

    if (doc && list && hidden) {
        put(&jb, doc, "hostname", str_or_null(s->sys.hostname[0] != '\0', s->sys.hostname));
        put(&jb, doc, "query_time", iso_time(s->t_real));
        put(&jb, doc, "query_time_unix", s->t_real > 0 ? json_real(s->t_real) : json_null());
        for (unsigned gi = 0; gi < s->n_gpus; gi++) /* GPU by GPU, as the snapshot document */
            for (unsigned i = 0; i < s->n_procs; i++)
                if (s->procs[i].gpu == gi)
                    append(&jb, list, led_by_gpu(&s->gpus[gi], proc_json(&jb, &s->procs[i])));
        for (unsigned i = 0; hidden_list && i < s->n_gpus; i++)
            if (s->gpus[i].hidden_st == GS_ST_OK && s->gpus[i].hidden_count > 0)
                append(&jb, hidden, led_by_gpu(&s->gpus[i], hidden_json(&s->gpus[i])));
        put(&jb, doc, "processes", list);
        list = NULL;
        if (hidden_list) {
            put(&jb, doc, "hidden_processes", hidden);
            hidden = NULL;
        }
    } else {
        jb.failed = 1;
    }
    json_decref(list);
    json_decref(hidden);
    if (jb.failed) {
        json_decref(doc);
        return gs_err_set(err, GS_ENOMEM, "json: out of memory");
    }
    *out = doc;
    return GS_OK;
}

/* ---- the snapshot document back into a snapshot ---- */

static void copy_str(char *dst, size_t len, const json_t *v)
{
    snprintf(dst, len, "%s", json_is_string(v) ? json_string_value(v) : "");
}

static uint8_t status_of(const json_t *unavail, const char *name)
{
    const char *why = json_string_value(json_object_get(unavail, name));

    if (!why)
        return GS_ST_NA;
    if (strcmp(why, "no_permission") == 0)
        return GS_ST_NOPERM;
    if (strcmp(why, "gpu_lost") == 0)
        return GS_ST_LOST;
    if (strcmp(why, "mig_mode") == 0) /* absent: MIG mode, said again when encoded */
        return GS_ST_NA;
    return GS_ST_ERROR;
}

/* What mig_more_json wrote (the profile comes back with the name). */
static void mig_more_from_json(struct gs_mig *d, const json_t *m)
{
    const json_t *v;

    if (json_is_integer(v = json_object_get(m, "bar1_total"))) {
        d->bar1_st = GS_ST_OK;
        d->bar1_total_bytes = (uint64_t)json_integer_value(v);
        d->bar1_used_bytes = (uint64_t)json_integer_value(json_object_get(m, "bar1_used"));
    }
    if (json_is_integer(v = json_object_get(m, "sm_count"))) {
        d->attr_st = GS_ST_OK;
        d->sm_count = (unsigned)json_integer_value(v);
        d->ce_count = (unsigned)json_integer_value(json_object_get(m, "copy_engine_count"));
        d->enc_count = (unsigned)json_integer_value(json_object_get(m, "encoder_count"));
        d->dec_count = (unsigned)json_integer_value(json_object_get(m, "decoder_count"));
        d->jpg_count = (unsigned)json_integer_value(json_object_get(m, "jpeg_count"));
        d->ofa_count = (unsigned)json_integer_value(json_object_get(m, "ofa_count"));
    }
    if (json_is_object(v = json_object_get(m, "placement"))) {
        d->place_st = GS_ST_OK;
        d->place_start = (unsigned)json_integer_value(json_object_get(v, "start"));
        d->place_size = (unsigned)json_integer_value(json_object_get(v, "size"));
        d->profile_id = (unsigned)json_integer_value(json_object_get(m, "profile_id"));
    } else {
        d->place_st = status_of(json_object_get(m, "unavailable"), "placement");
    }
    for (int k = 0; k < GS_MIG_GPM__COUNT; k++) {
        v = json_object_get(m, gs_metric_name(gs_mig_gpm_metric((enum gs_mig_gpm)k)));
        if (json_is_number(v)) {
            d->gpm_st[k] = GS_ST_OK;
            d->gpm[k] = json_number_value(v);
        }
    }
}

static void gpu_from_json(struct gs_gpu *g, const json_t *o)
{
    const json_t *unavail = json_object_get(o, "unavailable");
    const json_t *ecc = json_object_get(o, "ecc_errors_by_location");
    const json_t *migs = json_object_get(o, "mig_devices"), *m;
    const json_t *hidden = json_object_get(o, "hidden_processes");
    static const char *const kinds[2][2] = {
        {"corrected_volatile", "corrected_aggregate"},
        {"uncorrected_volatile", "uncorrected_aggregate"},
    };
    size_t i;

    g->index = (unsigned)json_integer_value(json_object_get(o, "index"));
    g->lost = json_is_true(json_object_get(o, "lost"));
    for (int t = 0; t < GS_T__COUNT; t++) {
        const json_t *v = json_object_get(o, text_keys[t]);
        if (json_is_string(v)) {
            copy_str(g->text[t], GS_STR_LEN, v);
            g->tst[t] = GS_ST_OK;
        }
    }
    for (int k = 0; k < GS_M__COUNT; k++) {
        const char *name = gs_metric_name((enum gs_metric)k);
        const json_t *v = json_object_get(o, name);
        if (json_is_number(v))
            gs_gpu_set(g, (enum gs_metric)k, json_number_value(v));
        else
            g->st[k] = status_of(unavail, name);
    }
    for (int t = 0; t < 2; t++)
        for (int c = 0; c < 2; c++) {
            const json_t *locs = json_object_get(ecc, kinds[t][c]);
            for (int l = 0; l < GS_ECC_LOCATIONS; l++) {
                const json_t *v = json_object_get(locs, ecc_keys[l]);
                if (json_is_integer(v)) {
                    g->ecc_loc_st[t][c][l] = GS_ST_OK;
                    g->ecc_loc[t][c][l] = (uint64_t)json_integer_value(v);
                }
            }
        }
    if (json_is_object(hidden)) {
        const json_t *n = json_object_get(hidden, "count"), *mem;
        g->hidden_st = GS_ST_OK;
        g->hidden_count = json_integer_value(n) > 0 ? (unsigned)json_integer_value(n) : 0;
        if (json_is_integer(mem = json_object_get(hidden, "gpu_memory"))) {
            g->hidden_mem_st = GS_ST_OK;
            g->hidden_mem_bytes = (uint64_t)json_integer_value(mem);
        }
    }
    nvlinks_from_json(g, json_object_get(o, "nvlinks"));
    if (json_is_number(json_object_get(o, "nvlinks_state_time_unix")))
        g->nvlink_state_t = json_number_value(json_object_get(o, "nvlinks_state_time_unix"));
    json_array_foreach(migs, i, m)
    {
        struct gs_mig *d;
        const json_t *total = json_object_get(m, "memory_total");
        if (g->n_mig >= GS_MIG_MAX)
            break;
        d = &g->mig[g->n_mig++];
        d->index = (unsigned)json_integer_value(json_object_get(m, "index"));
        d->gi_id = (unsigned)json_integer_value(json_object_get(m, "gi_id"));
        d->ci_id = (unsigned)json_integer_value(json_object_get(m, "ci_id"));
        copy_str(d->uuid, sizeof d->uuid, json_object_get(m, "uuid"));
        copy_str(d->name, sizeof d->name, json_object_get(m, "name"));
        if (json_is_integer(total)) {
            d->mem_st = GS_ST_OK;
            d->mem_total_bytes = (uint64_t)json_integer_value(total);
            d->mem_used_bytes = (uint64_t)json_integer_value(json_object_get(m, "memory_used"));
            d->mem_free_bytes = (uint64_t)json_integer_value(json_object_get(m, "memory_free"));
        }
        mig_more_from_json(d, m);
    }
}

static unsigned job_kind(const char *runtime)
{
    static const struct {
        const char *name;
        unsigned kind;
    } rt[] = {{"docker", GS_JOB_DOCKER},
              {"containerd", GS_JOB_CONTAINERD},
              {"cri-o", GS_JOB_CRIO},
              {"podman", GS_JOB_PODMAN}};

    for (size_t i = 0; runtime && i < sizeof rt / sizeof rt[0]; i++)
        if (strcmp(runtime, rt[i].name) == 0)
            return rt[i].kind;
    return GS_JOB_CONTAINER;
}

/* The "pod" object of a process entry (pod_names_json), when it is one with a name. */
static void pod_names_from_json(struct gs_proc *p, const json_t *pod)
{
    if (!json_is_object(pod) || !json_is_string(json_object_get(pod, "name")))
        return;
    copy_str(p->pod_name, sizeof p->pod_name, json_object_get(pod, "name"));
    copy_str(p->pod_namespace, sizeof p->pod_namespace, json_object_get(pod, "namespace"));
    copy_str(p->pod_container, sizeof p->pod_container, json_object_get(pod, "container"));
}

static void proc_from_json(struct gs_proc *p, const json_t *o, unsigned gpu)
{
    const json_t *types = json_object_get(o, "type"), *t, *v;
    const json_t *ctr = json_object_get(o, "container");
    size_t i;

    memset(p, 0, sizeof *p);
    p->pid = (unsigned)json_integer_value(json_object_get(o, "pid"));
    p->gpu = gpu;
    json_array_foreach(types, i, t)
    {
        const char *s = json_string_value(t);
        if (!s)
            continue;
        p->type |= strcmp(s, "compute") == 0    ? GS_PROC_COMPUTE
                   : strcmp(s, "graphics") == 0 ? GS_PROC_GRAPHICS
                   : strcmp(s, "mps") == 0      ? GS_PROC_MPS
                                                : 0u;
    }
    v = json_object_get(o, "gi_id");
    p->gi_id = json_is_integer(v) ? (unsigned)json_integer_value(v) : NO_INSTANCE;
    v = json_object_get(o, "ci_id");
    p->ci_id = json_is_integer(v) ? (unsigned)json_integer_value(v) : NO_INSTANCE;
    v = json_object_get(o, "gpu_memory");
    if (json_is_integer(v)) {
        p->mem_st = GS_ST_OK;
        p->gpu_mem_bytes = (uint64_t)json_integer_value(v);
    }
    if (json_is_number(json_object_get(o, "utilization_sm"))) {
        p->util_st = GS_ST_OK;
        p->sm_util = json_number_value(json_object_get(o, "utilization_sm"));
        p->mem_util = json_number_value(json_object_get(o, "utilization_memory"));
        p->enc_util = json_number_value(json_object_get(o, "utilization_encoder"));
        p->dec_util = json_number_value(json_object_get(o, "utilization_decoder"));
    }
    copy_str(p->name, sizeof p->name, json_object_get(o, "name"));
    v = json_object_get(o, "uid");
    if (json_is_integer(v)) { /* encoded only when host_st is OK */
        p->host_st = GS_ST_OK;
        p->uid = (uint32_t)json_integer_value(v);
        copy_str(p->cmdline, sizeof p->cmdline, json_object_get(o, "command"));
        copy_str(p->user, sizeof p->user, json_object_get(o, "user"));
        p->rss_bytes = (uint64_t)json_integer_value(json_object_get(o, "memory_rss"));
        p->start_time = json_number_value(json_object_get(o, "start_time"));
    }
    v = json_object_get(o, "cpu_ratio");
    if (json_is_number(v)) {
        p->cpu_st = GS_ST_OK;
        p->cpu_ratio = json_number_value(v);
    }
    if (json_is_object(ctr) && json_is_string(json_object_get(ctr, "id"))) {
        copy_str(p->container_id, sizeof p->container_id, json_object_get(ctr, "id"));
        p->job_kind = (uint8_t)job_kind(json_string_value(json_object_get(ctr, "runtime")));
    }
    copy_str(p->pod_uid, sizeof p->pod_uid, json_object_get(o, "pod_uid"));
    copy_str(p->slurm_job, sizeof p->slurm_job, json_object_get(o, "slurm_job"));
    pod_names_from_json(p, json_object_get(o, "pod"));
    if (!p->container_id[0] && p->slurm_job[0])
        p->job_kind = GS_JOB_SLURM;
}

int gs_snapjson_decode(const json_t *doc, bool hidden_as_procs, struct gs_snapshot **out,
                       struct gs_err *err)
{
    const json_t *gpus = json_object_get(doc, "gpus"), *g, *v;
    struct gs_snapshot *s = NULL;
    unsigned n_procs = 0;
    size_t i, j;
    int rc;

    if (!json_is_array(gpus))
        return gs_err_set(err, GS_EPARSE, "agent: the snapshot has no gpus");
    if (json_array_size(gpus) > DECODE_GPUS_MAX)
        return gs_err_set(err, GS_EPARSE, "agent: the snapshot has %zu gpus, more than %u",
                          json_array_size(gpus), DECODE_GPUS_MAX);
    json_array_foreach(gpus, i, g)
    {
        size_t n = json_array_size(json_object_get(g, "processes"));
        if (n > DECODE_PROCS_MAX || n_procs + n + 1 > DECODE_PROCS_MAX)
            return gs_err_set(err, GS_EPARSE, "agent: the snapshot has more than %u processes",
                              DECODE_PROCS_MAX);
        n_procs += (unsigned)n + 1;
    }
    rc = gs_snapshot_new(&s, (unsigned)json_array_size(gpus), n_procs ? n_procs : 1, err);
    if (rc != GS_OK)
        return rc;
    copy_str(s->sys.hostname, sizeof s->sys.hostname, json_object_get(doc, "hostname"));
    if (json_is_string(v = json_object_get(doc, "driver_version"))) {
        copy_str(s->sys.driver_version, sizeof s->sys.driver_version, v);
        s->sys.driver_st = GS_ST_OK;
    }
    if (json_is_string(v = json_object_get(doc, "nvml_version"))) {
        copy_str(s->sys.nvml_version, sizeof s->sys.nvml_version, v);
        s->sys.nvml_st = GS_ST_OK;
    }
    if (json_is_string(v = json_object_get(doc, "cuda_version"))) {
        int major = 0, minor = 0;
        if (sscanf(json_string_value(v), "%3d.%2d", &major, &minor) == 2 && major >= 0 &&
            minor >= 0) {
            s->sys.cuda_version = major * 1000 + minor * 10;
            s->sys.cuda_st = GS_ST_OK;
        }
    }
    if (json_is_true(json_object_get(doc, "simulated"))) {
        s->sys.simulated = 1;
        if (json_is_string(v = json_object_get(doc, "simulator")))
            copy_str(s->sys.sim_info, sizeof s->sys.sim_info, v);
        else
            snprintf(s->sys.sim_info, sizeof s->sys.sim_info, "nvml-sim");
    }
    s->t_real = json_number_value(json_object_get(doc, "query_time_unix"));
    if (!(s->t_real > 0 && s->t_real < 1e11)) /* unix seconds; anything else: unknown */
        s->t_real = 0;
    s->sys.gpu_count = s->n_gpus;
    json_array_foreach(gpus, i, g)
    {
        const json_t *procs = json_object_get(g, "processes"), *pr;
        const json_t *h = json_object_get(g, "hidden_processes");
        gpu_from_json(&s->gpus[i], g);
        json_array_foreach(procs, j, pr) proc_from_json(&s->procs[s->n_procs++], pr, (unsigned)i);
        if (hidden_as_procs && json_integer_value(json_object_get(h, "count")) > 0) {
            struct gs_proc *p = &s->procs[s->n_procs++];
            memset(p, 0, sizeof *p);
            p->gpu = (unsigned)i;
            p->type = GS_PROC_COMPUTE;
            p->gi_id = p->ci_id = NO_INSTANCE;
            snprintf(p->name, sizeof p->name, "%lld hidden",
                     (long long)json_integer_value(json_object_get(h, "count")));
            if (json_is_integer(v = json_object_get(h, "gpu_memory"))) {
                p->mem_st = GS_ST_OK;
                p->gpu_mem_bytes = (uint64_t)json_integer_value(v);
            }
        }
    }
    *out = s;
    return GS_OK;
}
