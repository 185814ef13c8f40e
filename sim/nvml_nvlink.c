/*
 * nvml-sim entry points: NVLink link state, data-link error counters and the far end's PCI
 * info, plus the counters behind the NVLink field values (sim/nvml_power.c's batch answers
 * fields 90, 91, 84..89, 132..137 and 138..141 through gs_sim_nvlink_*).
 *
 * A GPU's "nvlink" object (scenario.h) gives its links. As on a real driver, a GPU without
 * NVLink (a PCIe card) answers NOT_SUPPORTED and a link number past its last link
 * INVALID_ARGUMENT. The throughput counters are the exact integral of the scenario's
 * nvlink_tx_kib_s / nvlink_rx_kib_s patterns (per active link) over virtual time, so they are
 * monotonic and move with the workload; an inactive link moves nothing. Events nvlink_down /
 * nvlink_up take a link down and bring it back at a virtual time.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "core.h"

/* Checks link against the call's GPU: NOT_SUPPORTED without NVLink, INVALID_ARGUMENT past it. */
nvmlReturn_t gs_sim_nvlink_check(const struct gs_sim_call *c, unsigned link)
{
    if (c->g->nvlink.n_links == 0)
        return NVML_ERROR_NOT_SUPPORTED;
    if (link >= c->g->nvlink.n_links)
        return NVML_ERROR_INVALID_ARGUMENT;
    return NVML_SUCCESS;
}

/* Whether a nvlink_down / nvlink_up event at or before t concerns this link. */
static bool link_event(const struct gs_sim_event *e, unsigned gpu, unsigned link)
{
    return (e->kind == GS_SIM_EV_NVLINK_DOWN || e->kind == GS_SIM_EV_NVLINK_UP) && e->gpu == gpu &&
           e->data == link;
}

bool gs_sim_nvlink_active(const struct gs_sim_call *c, unsigned link)
{
    bool on;

    if (link >= c->g->nvlink.n_links)
        return false;
    on = c->g->nvlink.active[link];
    for (unsigned i = 0; i < c->sc->n_events && c->sc->events[i].at_s <= c->t; i++)
        if (link_event(&c->sc->events[i], c->gpu, link))
            on = c->sc->events[i].kind == GS_SIM_EV_NVLINK_UP;
    return on;
}

/* The integral of the link's pattern over the times in [0, t] it was active. */
double gs_sim_nvlink_kib(const struct gs_sim_call *c, unsigned link, bool rx, bool raw)
{
    const struct gs_sim_nvlink *nl = &c->g->nvlink;
    const struct gs_sim_pattern *p = &c->g->metric[rx ? GS_SIM_M_NVLINK_RX : GS_SIM_M_NVLINK_TX];
    double kib = 0, from = 0;
    bool on;

    if (link >= nl->n_links || c->t <= 0)
        return 0;
    on = nl->active[link];
    for (unsigned i = 0; i < c->sc->n_events && c->sc->events[i].at_s <= c->t; i++) {
        const struct gs_sim_event *e = &c->sc->events[i];
        if (!link_event(e, c->gpu, link))
            continue;
        if (on && e->kind == GS_SIM_EV_NVLINK_DOWN)
            kib += gs_sim_pattern_integral(p, e->at_s) - gs_sim_pattern_integral(p, from);
        if (!on && e->kind == GS_SIM_EV_NVLINK_UP)
            from = e->at_s;
        on = e->kind == GS_SIM_EV_NVLINK_UP;
    }
    if (on)
        kib += gs_sim_pattern_integral(p, c->t) - gs_sim_pattern_integral(p, from);
    if (!(kib > 0))
        return 0;
    return raw ? kib * (1 + nl->raw_overhead) : kib;
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link,
                                                         nvmlEnableState_t *isActive)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter(GS_SIM_FN_nvmlDeviceGetNvLinkState, device, 0, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!isActive)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    rc = gs_sim_nvlink_check(&c, link);
    if (rc == NVML_SUCCESS)
        *isActive = gs_sim_nvlink_active(&c, link) ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
    return gs_sim_leave(rc);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetNvLinkErrorCounter(nvmlDevice_t device,
                                                                unsigned int link,
                                                                nvmlNvLinkErrorCounter_t counter,
                                                                unsigned long long *counterValue)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter(GS_SIM_FN_nvmlDeviceGetNvLinkErrorCounter, device, 0, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!counterValue)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    rc = gs_sim_nvlink_check(&c, link);
    if (rc != NVML_SUCCESS)
        return gs_sim_leave(rc);
    if (counter >= GS_SIM_NVLINK_ERRORS) /* ECC_DATA (4) and later: not on this board */
        return gs_sim_leave(counter == 4 ? NVML_ERROR_NOT_SUPPORTED : NVML_ERROR_INVALID_ARGUMENT);
    *counterValue = c.g->nvlink.errors[link][counter];
    return gs_sim_leave(NVML_SUCCESS);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device,
                                                                    unsigned int link,
                                                                    nvmlPciInfo_t *pci)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter(GS_SIM_FN_nvmlDeviceGetNvLinkRemotePciInfo_v2, device, 0, &c);
    unsigned dom = 0, bus = 0, dev = 0, fn = 0;
    const char *id;

    if (rc != NVML_SUCCESS)
        return rc;
    if (!pci)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    rc = gs_sim_nvlink_check(&c, link);
    if (rc != NVML_SUCCESS)
        return gs_sim_leave(rc);
    id = c.g->nvlink.remote[link];
    if (!id[0])
        return gs_sim_leave(NVML_ERROR_NOT_SUPPORTED);
    memset(pci, 0, sizeof *pci);
    if (sscanf(id, "%x:%x:%x.%x", &dom, &bus, &dev, &fn) != 4)
        dom = bus = dev = 0;
    pci->domain = dom;
    pci->bus = bus;
    pci->device = dev;
    snprintf(pci->busId, sizeof pci->busId, "%s", id);
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04X:%02X:%02X.%X", dom & 0xFFFF, bus, dev,
             fn);
    return gs_sim_leave(NVML_SUCCESS);
}

/* The far end's kind: a GPU when the link's remote bus id is one of the scenario's GPUs, else an
 * NVSwitch (the only other far end a scenario describes). */
GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(
    nvmlDevice_t device, unsigned int link, nvmlIntNvLinkDeviceType_t *pNvLinkDeviceType)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter(GS_SIM_FN_nvmlDeviceGetNvLinkRemoteDeviceType, device, 0, &c);
    const char *id;

    if (rc != NVML_SUCCESS)
        return rc;
    if (!pNvLinkDeviceType)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    rc = gs_sim_nvlink_check(&c, link);
    if (rc != NVML_SUCCESS)
        return gs_sim_leave(rc);
    id = c.g->nvlink.remote[link];
    if (!id[0])
        return gs_sim_leave(NVML_ERROR_NOT_SUPPORTED);
    *pNvLinkDeviceType = NVML_NVLINK_DEVICE_TYPE_SWITCH;
    for (unsigned j = 0; j < c.sc->n_gpus; j++)
        if (strcasecmp(c.sc->gpus[j].bus_id, id) == 0)
            *pNvLinkDeviceType = NVML_NVLINK_DEVICE_TYPE_GPU;
    return gs_sim_leave(NVML_SUCCESS);
}

GS_SIM_EXPORT_FULL nvmlReturn_t nvmlDeviceGetNvLinkCapability(nvmlDevice_t device,
                                                              unsigned int link,
                                                              nvmlNvLinkCapability_t capability,
                                                              unsigned int *capResult)
{
    struct gs_sim_call c;
    nvmlReturn_t rc = gs_sim_enter(GS_SIM_FN_nvmlDeviceGetNvLinkCapability, device, 0, &c);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!capResult || capability >= NVML_NVLINK_CAP_COUNT)
        return gs_sim_leave(NVML_ERROR_INVALID_ARGUMENT);
    rc = gs_sim_nvlink_check(&c, link);
    if (rc != NVML_SUCCESS)
        return gs_sim_leave(rc);
    if (!c.g->nvlink.has_caps)
        return gs_sim_leave(NVML_ERROR_NOT_SUPPORTED);
    *capResult = c.g->nvlink.caps >> capability & 1u;
    return gs_sim_leave(NVML_SUCCESS);
}
