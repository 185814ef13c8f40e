/*
 * nvml_proc.c - processes on a device (lists, per-process utilization) and the driver's utilization
 * samples.
 */
#include "backend/nvml_int.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- processes -------------------------------------------------------------------------- */

static int pbuf_grow(struct gs_backend *b, unsigned want)
{
    unsigned char *p;
    if (want > NVML_PROC_CAP_MAX)
        want = NVML_PROC_CAP_MAX;
    if (want <= b->pcap)
        return -1;
    p = realloc(b->pbuf, (size_t)want * GS_NVML_PROC_STRIDE_MAX); /* old kept on failure */
    if (!p)
        return -1;
    b->pbuf = p;
    b->pcap = want;
    return 0;
}

/* Calls a process-list function with our buffer, growing it while the driver says
 * INSUFFICIENT_SIZE (processes can appear between calls). */
static nvmlReturn_t list_procs(struct gs_backend *b, fn_d_procs fn, nvmlDevice_t h, unsigned *n)
{
    for (int tries = 0; tries < 4; tries++) {
        unsigned int cnt = b->pcap;
        nvmlReturn_t r;
        /* 32 bytes per entry whatever stride we parse with (§7): a driver that writes the
         * larger struct cannot overrun the buffer. */
        r = fn(h, &cnt, b->pbuf);
        if (r == NVML_SUCCESS) {
            *n = cnt < b->pcap ? cnt : b->pcap;
            return r;
        }
        if (r != NVML_ERROR_INSUFFICIENT_SIZE)
            return r;
        if (pbuf_grow(b, cnt > b->pcap ? cnt * 2 + 5 : b->pcap * 2) != 0)
            return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    return NVML_ERROR_INSUFFICIENT_SIZE;
}

/* The entry for pid among this GPU's processes (from index first on), added if new. */
static struct gs_proc *proc_slot(struct gs_snapshot *s, unsigned first, unsigned pid, unsigned gpu,
                                 struct gs_err *err)
{
    struct gs_proc *p;
    for (unsigned i = first; i < s->n_procs; i++)
        if (s->procs[i].pid == pid)
            return &s->procs[i];
    if (gs_snapshot_reserve_procs(s, s->n_procs + 1, err) != GS_OK)
        return NULL;
    p = &s->procs[s->n_procs++];
    memset(p, 0, sizeof *p);
    p->pid = pid;
    p->gpu = gpu;
    p->gi_id = p->ci_id = NVML_MIG_ID_NONE;
    return p;
}

static int merge_list(struct gs_backend *b, unsigned dev, unsigned first, struct gs_snapshot *s,
                      unsigned n, unsigned stride, unsigned type, struct gs_err *err)
{
    for (unsigned i = 0; i < n; i++) {
        const unsigned char *e = b->pbuf + (size_t)i * stride;
        unsigned int pid, gi = NVML_MIG_ID_NONE, ci = NVML_MIG_ID_NONE;
        unsigned long long mem;
        struct gs_proc *p;

        memcpy(&pid, e + offsetof(nvmlProcessInfo_v2_t, pid), sizeof pid);
        memcpy(&mem, e + offsetof(nvmlProcessInfo_v2_t, usedGpuMemory), sizeof mem);
        if (stride >= sizeof(nvmlProcessInfo_v2_t)) {
            memcpy(&gi, e + offsetof(nvmlProcessInfo_v2_t, gpuInstanceId), sizeof gi);
            memcpy(&ci, e + offsetof(nvmlProcessInfo_v2_t, computeInstanceId), sizeof ci);
        }
        p = proc_slot(s, first, pid, dev, err);
        if (!p)
            return GS_ENOMEM;
        p->type |= type;
        p->sim_only = (uint8_t)gs_nvml_sim_only_pid(b, pid);
        if (p->gi_id == NVML_MIG_ID_NONE) {
            p->gi_id = gi;
            p->ci_id = ci;
        }
        /* One process in two lists shares one allocation: take the larger, never the sum. */
        if (mem != NVML_VALUE_NOT_AVAILABLE && (p->mem_st != GS_ST_OK || mem > p->gpu_mem_bytes)) {
            p->gpu_mem_bytes = mem;
            p->mem_st = GS_ST_OK;
        }
    }
    return GS_OK;
}

static struct util_rec *urec_find(struct nvml_dev *d, unsigned pid)
{
    for (unsigned i = 0; i < d->n_urec; i++)
        if (d->urec[i].pid == pid)
            return &d->urec[i];
    return NULL;
}

static void urec_put(struct nvml_dev *d, const nvmlProcessUtilizationSample_t *e, int64_t now)
{
    struct util_rec *u = urec_find(d, e->pid);
    if (!u) {
        if (d->n_urec == d->cap_urec) {
            unsigned cap = d->cap_urec ? d->cap_urec * 2 : 16;
            struct util_rec *p = realloc(d->urec, cap * sizeof *p);
            if (!p)
                return;
            d->urec = p;
            d->cap_urec = cap;
        }
        u = &d->urec[d->n_urec++];
        memset(u, 0, sizeof *u);
        u->pid = e->pid;
    } else if (e->timeStamp < u->ts) {
        return; /* an older sample of the same process in the same batch */
    }
    u->ts = e->timeStamp;
    u->t_ns = now;
    u->sm = e->smUtil;
    u->mem = e->memUtil;
    u->enc = e->encUtil;
    u->dec = e->decUtil;
}

static void urec_prune(struct nvml_dev *d, int64_t now)
{
    unsigned k = 0;
    for (unsigned i = 0; i < d->n_urec; i++)
        if (now - d->urec[i].t_ns <= NVML_PUTIL_KEEP_NS)
            d->urec[k++] = d->urec[i];
    d->n_urec = k;
}

/* Fetches the samples newer than the last one seen. Returns the status the query earned:
 * OK when it worked (even with no new sample: NOT_FOUND means exactly that). */
static uint8_t putil_update(struct gs_backend *b, struct nvml_dev *d, int64_t now, int *lost)
{
    fn_d_putil fn = b->fn.proc_util;
    unsigned int cnt = 0;
    nvmlReturn_t r;

    urec_prune(d, now);
    r = fn(d->h, NULL, &cnt, d->putil_ts);
    if (r == NVML_ERROR_NOT_FOUND || (r == NVML_SUCCESS && cnt == 0))
        return GS_ST_OK;
    if (r != NVML_SUCCESS && r != NVML_ERROR_INSUFFICIENT_SIZE)
        goto fail;
    if (cnt + 8 > b->ucap) {
        unsigned cap = cnt + 8 > NVML_PROC_CAP_MAX ? NVML_PROC_CAP_MAX : cnt + 8;
        nvmlProcessUtilizationSample_t *p = realloc(b->ubuf, cap * sizeof *p);
        if (!p)
            return GS_ST_ERROR;
        b->ubuf = p;
        b->ucap = cap;
    }
    cnt = b->ucap;
    memset(b->ubuf, 0, cnt * sizeof *b->ubuf);
    r = fn(d->h, b->ubuf, &cnt, d->putil_ts);
    if (r == NVML_ERROR_NOT_FOUND)
        return GS_ST_OK;
    if (r != NVML_SUCCESS)
        goto fail;
    for (unsigned i = 0; i < cnt && i < b->ucap; i++) {
        const nvmlProcessUtilizationSample_t *e = &b->ubuf[i];
        /* Values above 100 % are driver glitches (nvtop#110); skip the whole entry. */
        if (e->smUtil > 100 || e->memUtil > 100 || e->encUtil > 100 || e->decUtil > 100)
            continue;
        if (e->timeStamp > d->putil_ts)
            d->putil_ts = e->timeStamp;
        urec_put(d, e, now);
    }
    return GS_ST_OK;
fail:
    if (r == NVML_ERROR_GPU_IS_LOST)
        *lost = 1;
    return gs_nvml_status(r);
}

static void fill_proc_util(struct gs_backend *b, struct nvml_dev *d, struct gs_snapshot *s,
                           unsigned first, int *lost)
{
    int64_t now = gs_clock_mono_ns();
    uint8_t st = putil_update(b, d, now, lost);

    for (unsigned i = first; i < s->n_procs; i++) {
        struct gs_proc *p = &s->procs[i];
        const struct util_rec *u = urec_find(d, p->pid);
        if (u && now - u->t_ns <= NVML_PUTIL_KEEP_NS) {
            p->sm_util = u->sm / 100.0;
            p->mem_util = u->mem / 100.0;
            p->enc_util = u->enc / 100.0;
            p->dec_util = u->dec / 100.0;
            p->util_st = GS_ST_OK;
        } else {
            /* No sample in the window: the process was idle or just started. Absent, not 0. */
            p->util_st = st == GS_ST_OK ? GS_ST_NA : st;
        }
    }
}

int gs_nvml_processes(struct gs_backend *b, unsigned dev, struct gs_snapshot *s, unsigned want,
                      struct gs_err *err)
{
    const fn_d_procs fns[3] = {b->fn.procs_compute, b->fn.procs_graphics, b->fn.procs_mps};
    static const unsigned types[3] = {GS_PROC_COMPUTE, GS_PROC_GRAPHICS, GS_PROC_MPS};
    struct nvml_dev *d;
    unsigned first = s->n_procs;
    int lost = 0;

    if (dev >= b->n)
        return gs_err_set(err, GS_ENOGPU, "nvml: no GPU %u (have %u)", dev, b->n);
    d = &b->dev[dev];
    if (!d->h)
        return GS_OK;
    for (int k = 0; k < 3 && !lost; k++) {
        unsigned n = 0;
        nvmlReturn_t r;
        int rc;
        if (!fns[k])
            continue;
        r = list_procs(b, fns[k], d->h, &n);
        if (r == NVML_ERROR_GPU_IS_LOST)
            lost = 1;
        if (r != NVML_SUCCESS)
            continue; /* NOT_SUPPORTED, NO_PERMISSION: this list stays empty */
        rc = merge_list(b, dev, first, s, n, b->proc_stride[k], types[k], err);
        if (rc != GS_OK)
            return rc;
    }
    if ((want & GS_WANT_PROC_UTIL) && b->fn.proc_util && !lost && s->n_procs > first)
        fill_proc_util(b, d, s, first, &lost);
    return GS_OK;
}

int gs_nvml_process_name(struct gs_backend *b, unsigned pid, char *buf, size_t len)
{
    nvmlReturn_t r;
    if (!b->fn.process_name || len == 0)
        return GS_ENOTSUP;
    memset(buf, 0, len);
    r = b->fn.process_name(pid, buf, (unsigned int)(len > 4096 ? 4096 : len));
    buf[len - 1] = '\0';
    if (r == NVML_SUCCESS)
        return GS_OK;
    buf[0] = '\0';
    switch (gs_nvml_status(r)) {
    case GS_ST_NA:
        return GS_ENOTSUP;
    case GS_ST_NOPERM:
        return GS_EPERM;
    }
    return r == NVML_ERROR_NOT_FOUND ? GS_ENOTFOUND : GS_ENVML;
}

/* ---- utilization samples ---------------------------------------------------------------- */

/* One sample's value as a number; utilization comes as UNSIGNED_INT, the rest is defensive. */
static int sample_value(nvmlValueType_t vt, const nvmlValue_t *v, double *out)
{
    switch (vt) {
    case NVML_VALUE_TYPE_UNSIGNED_INT:
        *out = v->uiVal;
        return 1;
    case NVML_VALUE_TYPE_UNSIGNED_LONG_LONG:
        *out = (double)v->ullVal;
        return 1;
    case NVML_VALUE_TYPE_DOUBLE:
        *out = v->dVal;
        return 1;
    }
    return 0;
}

/* Sorts b->sbuf[0..n) by timestamp. The driver hands its ring out in order, so this is one
 * pass in practice; it only guards the "newest timestamp seen" bookkeeping. */
static void samples_sort(nvmlSample_t *s, unsigned n)
{
    for (unsigned i = 1; i < n; i++) {
        nvmlSample_t x = s[i];
        unsigned j = i;
        for (; j > 0 && s[j - 1].timeStamp > x.timeStamp; j--)
            s[j] = s[j - 1];
        s[j] = x;
    }
}

static int samples_rc(struct gs_backend *b, unsigned dev, nvmlReturn_t r, struct gs_err *err)
{
    int rc = GS_ENVML;

    if (r == NVML_ERROR_GPU_IS_LOST)
        rc = GS_ELOST;
    else if (gs_nvml_driver_gone(r))
        rc = GS_ENODRIVER;
    else if (gs_nvml_status(r) == GS_ST_NA)
        rc = GS_ENOTSUP;
    else if (r == NVML_ERROR_NO_PERMISSION)
        rc = GS_EPERM;
    return gs_err_set(err, rc, "nvml: nvmlDeviceGetSamples(gpu %u): %s", dev, gs_nvml_errstr(b, r));
}

/* One call into the ring with our scratch buffer; a driver that answers INSUFFICIENT_SIZE
 * instead of filling what fits gets a buffer of the size it asks for, once. */
static nvmlReturn_t samples_fetch(struct gs_backend *b, nvmlDevice_t h, unsigned long long since,
                                  unsigned cap, nvmlValueType_t *vt, unsigned *n)
{
    unsigned int cnt = cap;
    nvmlReturn_t r = b->fn.samples(h, NVML_GPU_UTILIZATION_SAMPLES, since, vt, &cnt, b->sbuf);

    if (r == NVML_ERROR_INSUFFICIENT_SIZE) {
        cnt = 0;
        r = b->fn.samples(h, NVML_GPU_UTILIZATION_SAMPLES, since, vt, &cnt, NULL);
        if (r != NVML_SUCCESS)
            return r;
        if (cnt > b->scap && cnt <= NVML_SAMPLES_MAX) {
            nvmlSample_t *p = realloc(b->sbuf, cnt * sizeof *p); /* old kept on failure */
            if (!p)
                return NVML_ERROR_MEMORY;
            b->sbuf = p;
            b->scap = cnt;
        }
        cnt = b->scap;
        r = b->fn.samples(h, NVML_GPU_UTILIZATION_SAMPLES, since, vt, &cnt, b->sbuf);
    }
    *n = r == NVML_SUCCESS ? (cnt < b->scap ? cnt : b->scap) : 0;
    return r;
}

int gs_nvml_util_samples(struct gs_backend *b, unsigned dev, uint64_t *last_ts_us,
                         struct gs_util_sample *out, unsigned cap, unsigned *n, struct gs_err *err)
{
    nvmlValueType_t vt = NVML_VALUE_TYPE_UNSIGNED_INT;
    unsigned got = 0;
    nvmlReturn_t r;
    struct nvml_dev *d;

    *n = 0;
    if (dev >= b->n)
        return gs_err_set(err, GS_ENOGPU, "nvml: no GPU %u (have %u)", dev, b->n);
    d = &b->dev[dev];
    if (!b->fn.samples) /* before ~R304, or a stripped library: the feature is absent */
        return gs_err_set(err, GS_ENOTSUP, "nvml: nvmlDeviceGetSamples: not in %s", b->path);
    if (!d->h)
        return samples_rc(b, dev, d->h_rc, err);
    if (cap == 0)
        return GS_OK;
    if (cap > NVML_SAMPLES_MAX)
        cap = NVML_SAMPLES_MAX;
    if (cap > b->scap) { /* grows to the largest cap ever asked for, then stays */
        nvmlSample_t *p = realloc(b->sbuf, cap * sizeof *p);
        if (!p)
            return gs_err_set(err, GS_ENOMEM, "nvml: out of memory");
        b->sbuf = p;
        b->scap = cap;
    }
    memset(b->sbuf, 0, (size_t)b->scap * sizeof *b->sbuf);
    r = samples_fetch(b, d->h, *last_ts_us, cap, &vt, &got);
    if (r == NVML_ERROR_NOT_FOUND) /* nothing newer than *last_ts_us: not an error */
        return GS_OK;
    if (r != NVML_SUCCESS)
        return samples_rc(b, dev, r, err);
    if (got > cap)
        got = cap;
    samples_sort(b->sbuf, got);
    for (unsigned i = 0; i < got; i++) {
        const nvmlSample_t *e = &b->sbuf[i];
        double v;
        if (e->timeStamp <= *last_ts_us)
            continue; /* the driver's contract, checked: never count a sample twice */
        *last_ts_us = e->timeStamp;
        /* Values above 100 % are driver glitches (as in process utilization); skip them. */
        if (!sample_value(vt, &e->sampleValue, &v) || !(v >= 0 && v <= 100))
            continue;
        out[*n].t_us = e->timeStamp;
        out[*n].util_ratio = v / 100.0;
        (*n)++;
    }
    return GS_OK;
}
