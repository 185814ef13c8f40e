/*
 * The NVML backend's topology answer (backend.h topology, nvidia-smi topo -m): per pair of GPUs
 * the closest common PCIe ancestor (nvmlDeviceGetTopologyCommonAncestor) and the NVLinks
 * between them (nvmlDeviceGetNvLinkState, nvmlDeviceGetNvLinkRemotePciInfo_v2,
 * nvmlDeviceGetNvLinkRemoteDeviceType), and per GPU its ideal CPU set (nvmlDeviceGetCpuAffinity),
 * its closest NUMA nodes (nvmlDeviceGetMemoryAffinity) and the NUMA node of its own memory
 * (nvmlDeviceGetNumaNodeId, on boards whose memory is a NUMA node), and each NVLink's capabilities
 * (nvmlDeviceGetNvLinkCapability, nvidia-smi nvlink -c). One call answers every GPU (or those
 * asked for) and reads each GPU's NVLinks once, into a table of that call: O(n) link reads for n
 * GPUs, not one per pair. The caller says what it prints (enum gs_topo_read): the matrix
 * (ancestors, peers, affinity; topo -m) or the links' capabilities (six calls per link; nvlink
 * -c), and only that is asked of the driver. Read when asked, never sampled: nothing here is
 * kept between calls.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "backend/nvml_int.h"
#include "gpuscope/gs_err.h"

#define MASK_WORDS (GS_TOPO_CPUS_LEN / 8) /* 8192 CPUs: more than any machine has */
#define ULONG_BITS (8 * sizeof(unsigned long))

static int fatal(nvmlReturn_t r)
{
    return r == NVML_ERROR_GPU_IS_LOST || gs_nvml_driver_gone(r);
}

/* A bit set as nvidia-smi writes one: ranges joined by commas ("0-55,112-167"). */
static void mask_ranges(const unsigned long *m, unsigned words, char *out, size_t len)
{
    size_t o = 0;
    unsigned nbits = words * (unsigned)ULONG_BITS;

    out[0] = '\0';
    for (unsigned i = 0; i < nbits; i++) {
        unsigned j = i;
        int w;
        if (!(m[i / ULONG_BITS] >> (i % ULONG_BITS) & 1ul))
            continue;
        while (j + 1 < nbits && (m[(j + 1) / ULONG_BITS] >> ((j + 1) % ULONG_BITS) & 1ul))
            j++;
        w = j > i ? snprintf(out + o, len - o, "%s%u-%u", o ? "," : "", i, j)
                  : snprintf(out + o, len - o, "%s%u", o ? "," : "", i);
        if (w < 0 || (size_t)w >= len - o) { /* cannot happen at GS_TOPO_CPUS_LEN; stay whole */
            out[o] = '\0';
            return;
        }
        o += (size_t)w;
        i = j;
    }
}

/* One GPU's NVLinks as one topology answer reads them, once: the links the driver knows (states
 * up to the first it refuses), and the active ones by far end. The answer's table holds one per
 * GPU, read when a row first needs it (its own row, or a row whose links end at switches or at
 * GPUs) and dropped with the answer. */
struct links {
    int read;         /* 0: not read yet */
    nvmlReturn_t rc;  /* NVML_SUCCESS, or the state read that lost the GPU/driver */
    unsigned n_links; /* links whose state the driver told */
    uint8_t active[GS_NVLINK_MAX];
    unsigned n_switch;            /* active links ending at an NVSwitch */
    unsigned n_gpu;               /* active links ending at a GPU */
    char peer[GS_NVLINK_MAX][32]; /* far end's bus id of each GPU link */
    int pci_read;                 /* 0 not read, 1 read, -1 refused */
    nvmlPciInfo_t pci;            /* the GPU's own PCI info, read once when a peer needs it */
};

/* The links of one GPU, read into k unless k was read already in this answer. Stops at the
 * first link whose state the driver refuses; k->rc keeps a refusal that lost the GPU. far: the
 * active links' far ends are read too (the matrix's peers; one answer asks the same of every
 * GPU). */
static const struct links *read_links(struct gs_backend *b, nvmlDevice_t h, struct links *k,
                                      int far)
{
    const struct nvml_fns *f = &b->fn;

    if (k->read)
        return k;
    memset(k, 0, sizeof *k);
    k->read = 1;
    for (unsigned l = 0; f->nvlink_state && l < GS_NVLINK_MAX; l++) {
        nvmlEnableState_t on = 0;
        nvmlIntNvLinkDeviceType_t type = NVML_NVLINK_DEVICE_TYPE_UNKNOWN;
        nvmlPciInfo_t pci;
        nvmlReturn_t r = f->nvlink_state(h, l, &on);

        if (r != NVML_SUCCESS) {
            if (fatal(r))
                k->rc = r;
            break;
        }
        k->n_links = l + 1;
        k->active[l] = on == 1;
        if (on != 1 || !far || !f->nvlink_remote_pci)
            continue;
        if (f->nvlink_remote_type && f->nvlink_remote_type(h, l, &type) == NVML_SUCCESS &&
            type == NVML_NVLINK_DEVICE_TYPE_SWITCH) {
            k->n_switch++;
            continue;
        }
        memset(&pci, 0, sizeof pci);
        if (f->nvlink_remote_pci(h, l, &pci) != NVML_SUCCESS)
            continue;
        if (type != NVML_NVLINK_DEVICE_TYPE_GPU && type != NVML_NVLINK_DEVICE_TYPE_UNKNOWN)
            continue; /* an IBM NPU: a CPU, not a peer */
        if (pci.busId[0])
            snprintf(k->peer[k->n_gpu], sizeof k->peer[0], "%.*s", (int)sizeof pci.busId,
                     pci.busId);
        else
            snprintf(k->peer[k->n_gpu], sizeof k->peer[0], "%08X:%02X:%02X.0", pci.domain, pci.bus,
                     pci.device);
        k->n_gpu++;
    }
    return k;
}

/* GPU j's own PCI info from the table, read once; NULL when the driver does not tell it. */
static const nvmlPciInfo_t *own_pci(struct gs_backend *b, nvmlDevice_t h, struct links *k)
{
    if (!k->pci_read)
        k->pci_read = b->fn.pci && b->fn.pci(h, &k->pci) == NVML_SUCCESS ? 1 : -1;
    return k->pci_read == 1 ? &k->pci : NULL;
}

static int topo_rc(struct gs_backend *b, unsigned dev, const char *call, nvmlReturn_t r,
                   struct gs_err *err)
{
    int rc = r == NVML_ERROR_GPU_IS_LOST ? GS_ELOST : GS_ENODRIVER;
    return gs_err_set(err, rc, "nvml: %s(gpu %u): %s", call, dev, gs_nvml_errstr(b, r));
}

/* The capabilities of GPU h's active links (nvlink -c prints no other link's) into t. */
static void link_caps(const struct nvml_fns *f, nvmlDevice_t h, const struct links *mine,
                      struct gs_topo *t)
{
    for (unsigned l = 0; f->nvlink_cap && l < mine->n_links; l++) {
        if (!mine->active[l])
            continue;
        for (unsigned c = 0; c < NVML_NVLINK_CAP_COUNT; c++) {
            unsigned v = 0;
            if (f->nvlink_cap(h, l, c, &v) != NVML_SUCCESS)
                continue;
            t->caps_read[l] |= (uint8_t)(1u << c);
            t->caps[l] |= (uint8_t)((v != 0) << c);
        }
    }
}

/* GPU dev's row of the answer, the parts in what (enum gs_topo_read); lk the answer's table of
 * links (one per GPU). */
static int topo_row(struct gs_backend *b, unsigned dev, unsigned what, struct gs_topo *t,
                    struct links *lk, struct gs_err *err)
{
    const struct nvml_fns *f = &b->fn;
    unsigned long mask[MASK_WORDS];
    const struct links *mine;
    nvmlReturn_t r;
    nvmlDevice_t h = b->dev[dev].h;
    unsigned n = b->n < GS_TOPO_GPUS ? b->n : GS_TOPO_GPUS;

    if (!h)
        return gs_err_set(err, GS_ELOST, "nvml: GPU %u: %s", dev,
                          gs_nvml_errstr(b, b->dev[dev].h_rc));
    if (!(what & GS_TOPO_MATRIX)) { /* the links' states (and capabilities) only */
        mine = read_links(b, h, &lk[dev], 0);
        if (mine->rc != NVML_SUCCESS)
            return topo_rc(b, dev, "nvmlDeviceGetNvLinkState", mine->rc, err);
        t->n_links = mine->n_links;
        memcpy(t->link_active, mine->active, sizeof t->link_active);
        if (what & GS_TOPO_LINK_CAPS)
            link_caps(f, h, mine, t);
        return GS_OK;
    }
    memset(mask, 0, sizeof mask);
    if (f->cpu_affinity && (r = f->cpu_affinity(h, MASK_WORDS, mask)) == NVML_SUCCESS) {
        mask_ranges(mask, MASK_WORDS, t->cpus, sizeof t->cpus);
        t->cpus_st = GS_ST_OK;
    } else if (f->cpu_affinity && fatal(r)) {
        return topo_rc(b, dev, "nvmlDeviceGetCpuAffinity", r, err);
    }
    memset(mask, 0, sizeof mask);
    if (f->mem_affinity &&
        f->mem_affinity(h, MASK_WORDS, mask, NVML_AFFINITY_SCOPE_NODE) == NVML_SUCCESS) {
        mask_ranges(mask, MASK_WORDS, t->numa, sizeof t->numa);
        t->numa_st = t->numa[0] ? GS_ST_OK : GS_ST_NA; /* no node: the machine has no NUMA */
    }
    if (f->numa_node && f->numa_node(h, &t->gpu_numa) == NVML_SUCCESS)
        t->gpu_numa_st = GS_ST_OK;
    mine = read_links(b, h, &lk[dev], 1);
    if (mine->rc != NVML_SUCCESS)
        return topo_rc(b, dev, "nvmlDeviceGetNvLinkState", mine->rc, err);
    t->n_links = mine->n_links;
    memcpy(t->link_active, mine->active, sizeof t->link_active);
    if (what & GS_TOPO_LINK_CAPS)
        link_caps(f, h, mine, t);
    for (unsigned j = 0; j < n; j++) {
        nvmlGpuTopologyLevel_t level = 0;
        const nvmlPciInfo_t *pci;

        if (j == dev || !b->dev[j].h)
            continue;
        if (f->topo_common) {
            r = f->topo_common(h, b->dev[j].h, &level);
            if (r == NVML_SUCCESS) {
                t->level[j] = level;
                t->level_st[j] = GS_ST_OK;
            } else if (fatal(r)) {
                return topo_rc(b, dev, "nvmlDeviceGetTopologyCommonAncestor", r, err);
            }
        }
        if (mine->n_switch) {
            const struct links *theirs = read_links(b, b->dev[j].h, &lk[j], 1);
            if (theirs->rc == NVML_SUCCESS && theirs->n_switch)
                t->nvlinks[j] =
                    mine->n_switch < theirs->n_switch ? mine->n_switch : theirs->n_switch;
        }
        if (mine->n_gpu && (pci = own_pci(b, b->dev[j].h, &lk[j])) != NULL)
            for (unsigned l = 0; l < mine->n_gpu; l++)
                t->nvlinks[j] += strncasecmp(mine->peer[l], pci->busId, sizeof pci->busId) == 0;
    }
    return GS_OK;
}

int gs_nvml_topology(struct gs_backend *b, const unsigned char *sel, unsigned what,
                     struct gs_topo *t, unsigned n, struct gs_err *err)
{
    struct links *lk;
    int rc = GS_OK;

    if (n)
        memset(t, 0, n * sizeof *t);
    if (n > b->n)
        return gs_err_set(err, GS_ENOGPU, "nvml: no GPU %u (have %u)", n - 1, b->n);
    lk = calloc(b->n ? b->n : 1, sizeof *lk);
    if (!lk)
        return gs_err_set(err, GS_ENOMEM, "nvml: topology: out of memory");
    for (unsigned i = 0; i < n && rc == GS_OK; i++)
        if (!sel || sel[i])
            rc = topo_row(b, i, what, &t[i], lk, err);
    free(lk);
    return rc;
}
