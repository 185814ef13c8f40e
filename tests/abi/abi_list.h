/*
 * Everything tests/abi compares between src/backend/nvml_abi.h and NVIDIA's nvml.h, written
 * once and expanded twice (X-macro): abi_ours.c against our header, abi_theirs.c against the
 * real one. Each line becomes one or more struct gs_abi_entry (abi_table.h).
 *
 * The including file defines, before including this list:
 *   GS_ABI_SIDE_OURS   1 in abi_ours.c, 0 in abi_theirs.c
 *   GS_ABI_PICK(o, t)  o or t: the spelling this side uses when the two differ
 *   GS_ABI_IF_OURS(x)  x in abi_ours.c, nothing in abi_theirs.c
 *   GS_ABI_PROTO_OK(ret, fn, params)  1 when fn has this prototype on this side
 *
 * Names a header may lack: older nvml.h versions miss what NVIDIA added later, so each such
 * item sits under `#if GS_ABI_OPT(name)`. meson (tests/abi/meson.build) probes the real header
 * and passes -DGS_HAVE_<name>=0|1 to both files; our side always has the item, so an item the
 * real header lacks shows up in the test as "not in this nvml.h" instead of being dropped.
 * `#if GS_HAVE_<name>` alone (no OPT) picks between two spellings on both sides alike.
 * Both files build with -Wundef, so a GS_HAVE_ that meson does not probe is an error.
 *
 * A new declaration in nvml_abi.h needs a line here: the "coverage" test in test_nvml_abi.c
 * fails, naming it, until it has one.
 */

#define GS_ABI_S_(x) #x
#define GS_ABI_S(x) GS_ABI_S_(x)
#define GS_ABI_OPT(name) (GS_ABI_SIDE_OURS || GS_HAVE_##name)

#define GS_ABI_E(grp, key, name, rel, val) {grp, key, name, rel, (unsigned long long)(val)},

/* sizeof and alignof; the key uses our spelling, To / Tt name the type on each side. */
#define GS_ABI_TYPE2(grp, key, To, Tt)                                                             \
    GS_ABI_E(grp, "sizeof(" key ")", GS_ABI_PICK(GS_ABI_S(To), GS_ABI_S(Tt)), GS_ABI_EQ,           \
             sizeof(GS_ABI_PICK(To, Tt)))                                                          \
    GS_ABI_E(grp, "alignof(" key ")", GS_ABI_PICK(GS_ABI_S(To), GS_ABI_S(Tt)), GS_ABI_EQ,          \
             _Alignof(GS_ABI_PICK(To, Tt)))
#define GS_ABI_TYPE(grp, T) GS_ABI_TYPE2(grp, #T, T, T)

/* A struct's own size and alignment, grouped under its name. */
#define GS_ABI_STRUCT(T) GS_ABI_TYPE2(#T, #T, T, T)

/* Offset and size of one member (nested members allowed: metricInfo.unit). */
#define GS_ABI_FIELD2(key, To, Tt, f)                                                              \
    GS_ABI_E(key, key "." #f, GS_ABI_PICK(GS_ABI_S(To), GS_ABI_S(Tt)) "." #f, GS_ABI_EQ,           \
             offsetof(GS_ABI_PICK(To, Tt), f))                                                     \
    GS_ABI_E(key, "sizeof(" key "." #f ")", GS_ABI_PICK(GS_ABI_S(To), GS_ABI_S(Tt)) "." #f,        \
             GS_ABI_EQ, sizeof(((GS_ABI_PICK(To, Tt) *)0)->f))
#define GS_ABI_FIELD(T, f) GS_ABI_FIELD2(#T, T, T, f)

/* Constants. CONST2 for a value NVIDIA spells differently (old names). */
#define GS_ABI_CONST(grp, N) GS_ABI_E(grp, #N, #N, GS_ABI_EQ, N)
#define GS_ABI_CONST2(grp, key, No, Nt)                                                            \
    GS_ABI_E(grp, key, GS_ABI_PICK(#No, #Nt), GS_ABI_EQ, GS_ABI_PICK(No, Nt))
#define GS_ABI_ATLEAST(grp, key, o, t)                                                             \
    GS_ABI_E(grp, key, GS_ABI_PICK(#o, #t), GS_ABI_GE, GS_ABI_PICK(o, t))
#define GS_ABI_OURS_ONLY(grp, N) GS_ABI_IF_OURS(GS_ABI_E(grp, #N, #N, GS_ABI_OURS_ONLY, N))

/* A prototype we call through dlsym: 1 on both sides when nvml.h declares fn exactly so. */
#define GS_ABI_PROTO(ret, fn, params) GS_ABI_PROTO_K(#fn #params, ret, fn, params)
#define GS_ABI_PROTO_K(key, ret, fn, params)                                                       \
    GS_ABI_E("prototypes", key, #fn, GS_ABI_EQ, GS_ABI_PROTO_OK(ret, fn, params))

/* ---- scalar and handle types ---------------------------------------------------------- */
GS_ABI_TYPE("types", nvmlReturn_t)
GS_ABI_TYPE("types", nvmlDevice_t)
GS_ABI_TYPE("types", nvmlGpmSample_t)
GS_ABI_TYPE("types", nvmlEventSet_t)
GS_ABI_TYPE("types", nvmlGpuInstance_t)
GS_ABI_TYPE("types", nvmlEnableState_t)
GS_ABI_TYPE("types", nvmlBrandType_t)
GS_ABI_TYPE("types", nvmlDeviceArchitecture_t)
GS_ABI_TYPE("types", nvmlTemperatureSensors_t)
GS_ABI_TYPE("types", nvmlTemperatureThresholds_t)
GS_ABI_TYPE("types", nvmlClockType_t)
GS_ABI_TYPE("types", nvmlPstates_t)
GS_ABI_TYPE("types", nvmlPcieUtilCounter_t)
GS_ABI_TYPE("types", nvmlNvLinkErrorCounter_t)
GS_ABI_TYPE("types", nvmlIntNvLinkDeviceType_t)
GS_ABI_TYPE("types", nvmlNvLinkCapability_t)
GS_ABI_TYPE("types", nvmlGpuTopologyLevel_t)
GS_ABI_TYPE("types", nvmlAffinityScope_t)
GS_ABI_TYPE("types", nvmlComputeMode_t)
GS_ABI_TYPE("types", nvmlMemoryErrorType_t)
GS_ABI_TYPE("types", nvmlEccCounterType_t)
GS_ABI_TYPE("types", nvmlPageRetirementCause_t)
GS_ABI_TYPE("types", nvmlSamplingType_t)
GS_ABI_TYPE("types", nvmlValueType_t)
GS_ABI_TYPE("types", nvmlMemoryLocation_t)
GS_ABI_TYPE("types", nvmlInforomObject_t)

/* ---- structs: size, alignment, every member's offset and size ------------------------- */
GS_ABI_STRUCT(nvmlPciInfo_t)
GS_ABI_FIELD(nvmlPciInfo_t, busIdLegacy)
GS_ABI_FIELD(nvmlPciInfo_t, domain)
GS_ABI_FIELD(nvmlPciInfo_t, bus)
GS_ABI_FIELD(nvmlPciInfo_t, device)
GS_ABI_FIELD(nvmlPciInfo_t, pciDeviceId)
GS_ABI_FIELD(nvmlPciInfo_t, pciSubSystemId)
GS_ABI_FIELD(nvmlPciInfo_t, busId)

/* nvmlDeviceGetPciInfoExt's argument (550+). */
#if GS_ABI_OPT(nvmlPciInfoExt_v1_t)
GS_ABI_STRUCT(nvmlPciInfoExt_v1_t)
GS_ABI_FIELD(nvmlPciInfoExt_v1_t, version)
GS_ABI_FIELD(nvmlPciInfoExt_v1_t, domain)
GS_ABI_FIELD(nvmlPciInfoExt_v1_t, bus)
GS_ABI_FIELD(nvmlPciInfoExt_v1_t, device)
GS_ABI_FIELD(nvmlPciInfoExt_v1_t, pciDeviceId)
GS_ABI_FIELD(nvmlPciInfoExt_v1_t, pciSubSystemId)
GS_ABI_FIELD(nvmlPciInfoExt_v1_t, baseClass)
GS_ABI_FIELD(nvmlPciInfoExt_v1_t, subClass)
GS_ABI_FIELD(nvmlPciInfoExt_v1_t, busId)
#endif

GS_ABI_STRUCT(nvmlUtilization_t)
GS_ABI_FIELD(nvmlUtilization_t, gpu)
GS_ABI_FIELD(nvmlUtilization_t, memory)

GS_ABI_STRUCT(nvmlMemory_t)
GS_ABI_FIELD(nvmlMemory_t, total)
GS_ABI_FIELD(nvmlMemory_t, free)
GS_ABI_FIELD(nvmlMemory_t, used)

GS_ABI_STRUCT(nvmlMemory_v2_t)
GS_ABI_FIELD(nvmlMemory_v2_t, version)
GS_ABI_FIELD(nvmlMemory_v2_t, total)
GS_ABI_FIELD(nvmlMemory_v2_t, reserved)
GS_ABI_FIELD(nvmlMemory_v2_t, free)
GS_ABI_FIELD(nvmlMemory_v2_t, used)

GS_ABI_STRUCT(nvmlBAR1Memory_t)
GS_ABI_FIELD(nvmlBAR1Memory_t, bar1Total)
GS_ABI_FIELD(nvmlBAR1Memory_t, bar1Free)
GS_ABI_FIELD(nvmlBAR1Memory_t, bar1Used)

GS_ABI_STRUCT(nvmlDeviceAttributes_t)
GS_ABI_FIELD(nvmlDeviceAttributes_t, multiprocessorCount)
GS_ABI_FIELD(nvmlDeviceAttributes_t, sharedCopyEngineCount)
GS_ABI_FIELD(nvmlDeviceAttributes_t, sharedDecoderCount)
GS_ABI_FIELD(nvmlDeviceAttributes_t, sharedEncoderCount)
GS_ABI_FIELD(nvmlDeviceAttributes_t, sharedJpegCount)
GS_ABI_FIELD(nvmlDeviceAttributes_t, sharedOfaCount)
GS_ABI_FIELD(nvmlDeviceAttributes_t, gpuInstanceSliceCount)
GS_ABI_FIELD(nvmlDeviceAttributes_t, computeInstanceSliceCount)
GS_ABI_FIELD(nvmlDeviceAttributes_t, memorySizeMB)

GS_ABI_STRUCT(nvmlGpuInstancePlacement_t)
GS_ABI_FIELD(nvmlGpuInstancePlacement_t, start)
GS_ABI_FIELD(nvmlGpuInstancePlacement_t, size)
GS_ABI_STRUCT(nvmlGpuInstanceInfo_t)
GS_ABI_FIELD(nvmlGpuInstanceInfo_t, device)
GS_ABI_FIELD(nvmlGpuInstanceInfo_t, id)
GS_ABI_FIELD(nvmlGpuInstanceInfo_t, profileId)
GS_ABI_FIELD(nvmlGpuInstanceInfo_t, placement)

GS_ABI_STRUCT(nvmlValue_t)
GS_ABI_FIELD(nvmlValue_t, dVal)
#if GS_ABI_OPT(nvmlValue_t_siVal)
GS_ABI_FIELD(nvmlValue_t, siVal)
#endif
GS_ABI_FIELD(nvmlValue_t, uiVal)
GS_ABI_FIELD(nvmlValue_t, ulVal)
GS_ABI_FIELD(nvmlValue_t, ullVal)
GS_ABI_FIELD(nvmlValue_t, sllVal)
#if GS_ABI_OPT(nvmlValue_t_usVal)
GS_ABI_FIELD(nvmlValue_t, usVal)
#endif

GS_ABI_STRUCT(nvmlSample_t)
GS_ABI_FIELD(nvmlSample_t, timeStamp)
GS_ABI_FIELD(nvmlSample_t, sampleValue)

GS_ABI_STRUCT(nvmlFieldValue_t)
GS_ABI_FIELD(nvmlFieldValue_t, fieldId)
GS_ABI_FIELD(nvmlFieldValue_t, scopeId)
GS_ABI_FIELD(nvmlFieldValue_t, timestamp)
GS_ABI_FIELD(nvmlFieldValue_t, latencyUsec)
GS_ABI_FIELD(nvmlFieldValue_t, valueType)
GS_ABI_FIELD(nvmlFieldValue_t, nvmlReturn)
GS_ABI_FIELD(nvmlFieldValue_t, value)

GS_ABI_STRUCT(nvmlProcessInfo_v1_t)
GS_ABI_FIELD(nvmlProcessInfo_v1_t, pid)
GS_ABI_FIELD(nvmlProcessInfo_v1_t, usedGpuMemory)

/* Newer headers may drop the _v2 name (nvmlProcessInfo_t is then the 24-byte struct). */
#if GS_ABI_OPT(nvmlProcessInfo_v2_t)
GS_ABI_STRUCT(nvmlProcessInfo_v2_t)
GS_ABI_FIELD(nvmlProcessInfo_v2_t, pid)
GS_ABI_FIELD(nvmlProcessInfo_v2_t, usedGpuMemory)
GS_ABI_FIELD(nvmlProcessInfo_v2_t, gpuInstanceId)
GS_ABI_FIELD(nvmlProcessInfo_v2_t, computeInstanceId)
#endif

/* nvmlProcessInfo_t is what the header's _v3 process calls take: 24 bytes (our _v2 layout) in
 * every header but 535.43.02-535.86.05, where it carried usedGpuCcProtectedMemory (32 bytes,
 * our nvmlProcessDetail_v1_t layout). Compare it with whichever of ours it claims to be. */
#if GS_HAVE_nvmlProcessInfo_t_usedGpuCcProtectedMemory
#define GS_ABI_PROC_V3 nvmlProcessDetail_v1_t
#else
#define GS_ABI_PROC_V3 nvmlProcessInfo_v2_t
#endif
GS_ABI_TYPE2("nvmlProcessInfo_t", "nvmlProcessInfo_t", GS_ABI_PROC_V3, nvmlProcessInfo_t)
GS_ABI_FIELD2("nvmlProcessInfo_t", GS_ABI_PROC_V3, nvmlProcessInfo_t, pid)
GS_ABI_FIELD2("nvmlProcessInfo_t", GS_ABI_PROC_V3, nvmlProcessInfo_t, usedGpuMemory)
GS_ABI_FIELD2("nvmlProcessInfo_t", GS_ABI_PROC_V3, nvmlProcessInfo_t, gpuInstanceId)
GS_ABI_FIELD2("nvmlProcessInfo_t", GS_ABI_PROC_V3, nvmlProcessInfo_t, computeInstanceId)
#if GS_HAVE_nvmlProcessInfo_t_usedGpuCcProtectedMemory
GS_ABI_FIELD2("nvmlProcessInfo_t", GS_ABI_PROC_V3, nvmlProcessInfo_t, usedGpuCcProtectedMemory)
#endif

#if GS_ABI_OPT(nvmlProcessDetail_v1_t)
GS_ABI_STRUCT(nvmlProcessDetail_v1_t)
GS_ABI_FIELD(nvmlProcessDetail_v1_t, pid)
GS_ABI_FIELD(nvmlProcessDetail_v1_t, usedGpuMemory)
GS_ABI_FIELD(nvmlProcessDetail_v1_t, gpuInstanceId)
GS_ABI_FIELD(nvmlProcessDetail_v1_t, computeInstanceId)
GS_ABI_FIELD(nvmlProcessDetail_v1_t, usedGpuCcProtectedMemory)
#endif

/* nvmlDeviceGetRunningProcessDetailList's argument (535.104+). */
#if GS_ABI_OPT(nvmlProcessDetailList_t)
GS_ABI_STRUCT(nvmlProcessDetailList_t)
GS_ABI_FIELD(nvmlProcessDetailList_t, version)
GS_ABI_FIELD(nvmlProcessDetailList_t, mode)
GS_ABI_FIELD(nvmlProcessDetailList_t, numProcArrayEntries)
GS_ABI_FIELD(nvmlProcessDetailList_t, procArray)
#endif

/* nvmlDeviceGetConfComputeMemSizeInfo's argument (535.43+). */
#if GS_ABI_OPT(nvmlConfComputeMemSizeInfo_t)
GS_ABI_STRUCT(nvmlConfComputeMemSizeInfo_t)
GS_ABI_FIELD(nvmlConfComputeMemSizeInfo_t, protectedMemSizeKib)
GS_ABI_FIELD(nvmlConfComputeMemSizeInfo_t, unprotectedMemSizeKib)
#endif

GS_ABI_STRUCT(nvmlProcessUtilizationSample_t)
GS_ABI_FIELD(nvmlProcessUtilizationSample_t, pid)
GS_ABI_FIELD(nvmlProcessUtilizationSample_t, timeStamp)
GS_ABI_FIELD(nvmlProcessUtilizationSample_t, smUtil)
GS_ABI_FIELD(nvmlProcessUtilizationSample_t, memUtil)
GS_ABI_FIELD(nvmlProcessUtilizationSample_t, encUtil)
GS_ABI_FIELD(nvmlProcessUtilizationSample_t, decUtil)

GS_ABI_STRUCT(nvmlEventData_t)
GS_ABI_FIELD(nvmlEventData_t, device)
GS_ABI_FIELD(nvmlEventData_t, eventType)
GS_ABI_FIELD(nvmlEventData_t, eventData)
GS_ABI_FIELD(nvmlEventData_t, gpuInstanceId)
GS_ABI_FIELD(nvmlEventData_t, computeInstanceId)

/* nvmlDeviceGetTemperatureV's argument (565+). */
#if GS_ABI_OPT(nvmlTemperature_t)
GS_ABI_STRUCT(nvmlTemperature_t)
GS_ABI_FIELD(nvmlTemperature_t, version)
GS_ABI_FIELD(nvmlTemperature_t, sensorType)
GS_ABI_FIELD(nvmlTemperature_t, temperature)
#endif

/* nvmlDeviceGetFBCStats's argument. */
GS_ABI_STRUCT(nvmlFBCStats_t)
GS_ABI_FIELD(nvmlFBCStats_t, sessionsCount)
GS_ABI_FIELD(nvmlFBCStats_t, averageFPS)
GS_ABI_FIELD(nvmlFBCStats_t, averageLatency)

/* nvmlDeviceGetRepairStatus's argument (NVML 13.0, drivers 580+). */
#if GS_ABI_OPT(nvmlRepairStatus_t)
GS_ABI_STRUCT(nvmlRepairStatus_t)
GS_ABI_FIELD(nvmlRepairStatus_t, version)
GS_ABI_FIELD(nvmlRepairStatus_t, bChannelRepairPending)
GS_ABI_FIELD(nvmlRepairStatus_t, bTpcRepairPending)
#endif

/* nvmlDeviceGetMarginTemperature's argument (555+). */
#if GS_ABI_OPT(nvmlMarginTemperature_t)
GS_ABI_STRUCT(nvmlMarginTemperature_t)
GS_ABI_FIELD(nvmlMarginTemperature_t, version)
GS_ABI_FIELD(nvmlMarginTemperature_t, marginTemperature)
#endif

GS_ABI_STRUCT(nvmlGpmSupport_t)
GS_ABI_FIELD(nvmlGpmSupport_t, version)
GS_ABI_FIELD(nvmlGpmSupport_t, isSupportedDevice)

GS_ABI_STRUCT(nvmlGpmMetric_t)
GS_ABI_FIELD(nvmlGpmMetric_t, metricId)
GS_ABI_FIELD(nvmlGpmMetric_t, nvmlReturn)
GS_ABI_FIELD(nvmlGpmMetric_t, value)
GS_ABI_FIELD(nvmlGpmMetric_t, metricInfo)
GS_ABI_FIELD(nvmlGpmMetric_t, metricInfo.shortName)
GS_ABI_FIELD(nvmlGpmMetric_t, metricInfo.longName)
GS_ABI_FIELD(nvmlGpmMetric_t, metricInfo.unit)

/* metrics[] has NVML_GPM_METRIC_MAX entries, which grew 98 -> 210 -> 333 across drivers; ours
 * is sized for the largest. Same header, same element, nothing after the array; ours no
 * smaller than theirs. */
GS_ABI_E("nvmlGpmMetricsGet_t", "alignof(nvmlGpmMetricsGet_t)", NULL, GS_ABI_EQ,
         _Alignof(nvmlGpmMetricsGet_t))
GS_ABI_ATLEAST("nvmlGpmMetricsGet_t", "sizeof(nvmlGpmMetricsGet_t)", sizeof(nvmlGpmMetricsGet_t),
               sizeof(nvmlGpmMetricsGet_t))
GS_ABI_FIELD(nvmlGpmMetricsGet_t, version)
GS_ABI_FIELD(nvmlGpmMetricsGet_t, numMetrics)
GS_ABI_FIELD(nvmlGpmMetricsGet_t, sample1)
GS_ABI_FIELD(nvmlGpmMetricsGet_t, sample2)
GS_ABI_E("nvmlGpmMetricsGet_t", "nvmlGpmMetricsGet_t.metrics", NULL, GS_ABI_EQ,
         offsetof(nvmlGpmMetricsGet_t, metrics))
GS_ABI_E("nvmlGpmMetricsGet_t", "sizeof(nvmlGpmMetricsGet_t.metrics[0])", NULL, GS_ABI_EQ,
         sizeof(((nvmlGpmMetricsGet_t *)0)->metrics[0]))
GS_ABI_ATLEAST("nvmlGpmMetricsGet_t", "GS_NVML_GPM_METRIC_MAX", GS_NVML_GPM_METRIC_MAX,
               NVML_GPM_METRIC_MAX)
GS_ABI_E("nvmlGpmMetricsGet_t", "nvmlGpmMetricsGet_t: bytes after metrics[]", NULL, GS_ABI_EQ,
         sizeof(nvmlGpmMetricsGet_t) - offsetof(nvmlGpmMetricsGet_t, metrics) -
             sizeof(((nvmlGpmMetricsGet_t *)0)->metrics))

/* ---- constants ------------------------------------------------------------------------ */
GS_ABI_CONST("return codes", NVML_SUCCESS)
GS_ABI_CONST("return codes", NVML_ERROR_UNINITIALIZED)
GS_ABI_CONST("return codes", NVML_ERROR_INVALID_ARGUMENT)
GS_ABI_CONST("return codes", NVML_ERROR_NOT_SUPPORTED)
GS_ABI_CONST("return codes", NVML_ERROR_NO_PERMISSION)
GS_ABI_CONST("return codes", NVML_ERROR_ALREADY_INITIALIZED)
GS_ABI_CONST("return codes", NVML_ERROR_NOT_FOUND)
GS_ABI_CONST("return codes", NVML_ERROR_INSUFFICIENT_SIZE)
GS_ABI_CONST("return codes", NVML_ERROR_INSUFFICIENT_POWER)
GS_ABI_CONST("return codes", NVML_ERROR_DRIVER_NOT_LOADED)
GS_ABI_CONST("return codes", NVML_ERROR_TIMEOUT)
GS_ABI_CONST("return codes", NVML_ERROR_IRQ_ISSUE)
GS_ABI_CONST("return codes", NVML_ERROR_LIBRARY_NOT_FOUND)
GS_ABI_CONST("return codes", NVML_ERROR_FUNCTION_NOT_FOUND)
GS_ABI_CONST("return codes", NVML_ERROR_CORRUPTED_INFOROM)
GS_ABI_CONST("return codes", NVML_ERROR_GPU_IS_LOST)
GS_ABI_CONST("return codes", NVML_ERROR_RESET_REQUIRED)
GS_ABI_CONST("return codes", NVML_ERROR_OPERATING_SYSTEM)
GS_ABI_CONST("return codes", NVML_ERROR_LIB_RM_VERSION_MISMATCH)
GS_ABI_CONST("return codes", NVML_ERROR_IN_USE)
GS_ABI_CONST("return codes", NVML_ERROR_MEMORY)
GS_ABI_CONST("return codes", NVML_ERROR_NO_DATA)
GS_ABI_CONST("return codes", NVML_ERROR_VGPU_ECC_NOT_SUPPORTED)
GS_ABI_CONST("return codes", NVML_ERROR_INSUFFICIENT_RESOURCES)
GS_ABI_CONST("return codes", NVML_ERROR_FREQ_NOT_SUPPORTED)
GS_ABI_CONST("return codes", NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
#if GS_ABI_OPT(NVML_ERROR_DEPRECATED)
GS_ABI_CONST("return codes", NVML_ERROR_DEPRECATED)
#endif
#if GS_ABI_OPT(NVML_ERROR_NOT_READY)
GS_ABI_CONST("return codes", NVML_ERROR_NOT_READY)
#endif
#if GS_ABI_OPT(NVML_ERROR_GPU_NOT_FOUND)
GS_ABI_CONST("return codes", NVML_ERROR_GPU_NOT_FOUND)
#endif
#if GS_ABI_OPT(NVML_ERROR_INVALID_STATE)
GS_ABI_CONST("return codes", NVML_ERROR_INVALID_STATE)
#endif
GS_ABI_CONST("return codes", NVML_ERROR_UNKNOWN)

GS_ABI_CONST("architectures", NVML_DEVICE_ARCH_KEPLER)
GS_ABI_CONST("architectures", NVML_DEVICE_ARCH_MAXWELL)
GS_ABI_CONST("architectures", NVML_DEVICE_ARCH_PASCAL)
GS_ABI_CONST("architectures", NVML_DEVICE_ARCH_VOLTA)
GS_ABI_CONST("architectures", NVML_DEVICE_ARCH_TURING)
GS_ABI_CONST("architectures", NVML_DEVICE_ARCH_AMPERE)
GS_ABI_CONST("architectures", NVML_DEVICE_ARCH_ADA)
GS_ABI_CONST("architectures", NVML_DEVICE_ARCH_HOPPER)
#if GS_ABI_OPT(NVML_DEVICE_ARCH_BLACKWELL)
GS_ABI_CONST("architectures", NVML_DEVICE_ARCH_BLACKWELL)
#endif
#if GS_ABI_OPT(NVML_DEVICE_ARCH_RUBIN)
GS_ABI_CONST("architectures", NVML_DEVICE_ARCH_RUBIN)
#endif
GS_ABI_CONST("architectures", NVML_DEVICE_ARCH_UNKNOWN)

GS_ABI_CONST("enum values", NVML_FEATURE_DISABLED)
GS_ABI_CONST("enum values", NVML_FEATURE_ENABLED)
GS_ABI_CONST("enum values", NVML_INFOROM_OEM)
GS_ABI_CONST("enum values", NVML_INFOROM_ECC)
GS_ABI_CONST("enum values", NVML_INFOROM_POWER)
GS_ABI_CONST("enum values", NVML_TEMPERATURE_GPU)
GS_ABI_CONST("enum values", NVML_TEMPERATURE_THRESHOLD_SHUTDOWN)
GS_ABI_CONST("enum values", NVML_TEMPERATURE_THRESHOLD_SLOWDOWN)
GS_ABI_CONST("enum values", NVML_TEMPERATURE_THRESHOLD_MEM_MAX)
GS_ABI_CONST("enum values", NVML_TEMPERATURE_THRESHOLD_GPU_MAX)
GS_ABI_CONST("enum values", NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_MIN)
GS_ABI_CONST("enum values", NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_CURR)
GS_ABI_CONST("enum values", NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_MAX)
GS_ABI_CONST("enum values", NVML_CLOCK_GRAPHICS)
GS_ABI_CONST("enum values", NVML_CLOCK_SM)
GS_ABI_CONST("enum values", NVML_CLOCK_MEM)
GS_ABI_CONST("enum values", NVML_CLOCK_VIDEO)
GS_ABI_CONST("enum values", NVML_PSTATE_UNKNOWN)
GS_ABI_CONST("enum values", NVML_PCIE_UTIL_TX_BYTES)
GS_ABI_CONST("enum values", NVML_PCIE_UTIL_RX_BYTES)
GS_ABI_CONST("enum values", NVML_NVLINK_ERROR_DL_REPLAY)
GS_ABI_CONST("enum values", NVML_NVLINK_CAP_P2P_SUPPORTED)
GS_ABI_CONST("enum values", NVML_NVLINK_CAP_SYSMEM_ACCESS)
GS_ABI_CONST("enum values", NVML_NVLINK_CAP_P2P_ATOMICS)
GS_ABI_CONST("enum values", NVML_NVLINK_CAP_SYSMEM_ATOMICS)
GS_ABI_CONST("enum values", NVML_NVLINK_CAP_SLI_BRIDGE)
GS_ABI_CONST("enum values", NVML_NVLINK_CAP_VALID)
GS_ABI_CONST("enum values", NVML_NVLINK_CAP_COUNT)
GS_ABI_CONST("enum values", NVML_NVLINK_DEVICE_TYPE_GPU)
GS_ABI_CONST("enum values", NVML_NVLINK_DEVICE_TYPE_IBMNPU)
GS_ABI_CONST("enum values", NVML_NVLINK_DEVICE_TYPE_SWITCH)
GS_ABI_CONST("enum values", NVML_NVLINK_DEVICE_TYPE_UNKNOWN)
GS_ABI_CONST("enum values", NVML_TOPOLOGY_INTERNAL)
GS_ABI_CONST("enum values", NVML_TOPOLOGY_SINGLE)
GS_ABI_CONST("enum values", NVML_TOPOLOGY_MULTIPLE)
GS_ABI_CONST("enum values", NVML_TOPOLOGY_HOSTBRIDGE)
GS_ABI_CONST("enum values", NVML_TOPOLOGY_NODE)
GS_ABI_CONST("enum values", NVML_TOPOLOGY_SYSTEM)
GS_ABI_CONST("enum values", NVML_AFFINITY_SCOPE_NODE)
GS_ABI_CONST("enum values", NVML_AFFINITY_SCOPE_SOCKET)
GS_ABI_CONST("enum values", NVML_NVLINK_ERROR_DL_RECOVERY)
GS_ABI_CONST("enum values", NVML_NVLINK_ERROR_DL_CRC_FLIT)
GS_ABI_CONST("enum values", NVML_NVLINK_ERROR_DL_CRC_DATA)
GS_ABI_ATLEAST("flags and buffer sizes", "GS_NVML_NVLINK_MAX_LINKS", GS_NVML_NVLINK_MAX_LINKS,
               NVML_NVLINK_MAX_LINKS)
GS_ABI_OURS_ONLY("flags and buffer sizes", GS_NVML_SCOPE_ALL_LINKS)
GS_ABI_CONST("enum values", NVML_COMPUTEMODE_DEFAULT)
GS_ABI_CONST("enum values", NVML_COMPUTEMODE_EXCLUSIVE_THREAD)
GS_ABI_CONST("enum values", NVML_COMPUTEMODE_PROHIBITED)
GS_ABI_CONST("enum values", NVML_COMPUTEMODE_EXCLUSIVE_PROCESS)
GS_ABI_CONST("enum values", NVML_MEMORY_ERROR_TYPE_CORRECTED)
GS_ABI_CONST("enum values", NVML_MEMORY_ERROR_TYPE_UNCORRECTED)
GS_ABI_CONST("enum values", NVML_VOLATILE_ECC)
GS_ABI_CONST("enum values", NVML_AGGREGATE_ECC)
GS_ABI_CONST("enum values", NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS)
GS_ABI_CONST("enum values", NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR)
GS_ABI_CONST("enum values", NVML_DEVICE_MIG_DISABLE)
GS_ABI_CONST("enum values", NVML_DEVICE_MIG_ENABLE)
GS_ABI_CONST("enum values", NVML_MEMORY_LOCATION_L1_CACHE)
GS_ABI_CONST("enum values", NVML_MEMORY_LOCATION_L2_CACHE)
GS_ABI_CONST("enum values", NVML_MEMORY_LOCATION_DRAM)
GS_ABI_CONST("enum values", NVML_MEMORY_LOCATION_DEVICE_MEMORY)
GS_ABI_CONST("enum values", NVML_MEMORY_LOCATION_REGISTER_FILE)
GS_ABI_CONST("enum values", NVML_MEMORY_LOCATION_TEXTURE_MEMORY)
GS_ABI_CONST("enum values", NVML_MEMORY_LOCATION_TEXTURE_SHM)
GS_ABI_CONST("enum values", NVML_MEMORY_LOCATION_CBU)
GS_ABI_CONST("enum values", NVML_MEMORY_LOCATION_SRAM)
#if GS_ABI_OPT(NVML_PROCESS_MODE_COMPUTE)
GS_ABI_CONST("enum values", NVML_PROCESS_MODE_COMPUTE)
GS_ABI_CONST("enum values", NVML_PROCESS_MODE_GRAPHICS)
GS_ABI_CONST("enum values", NVML_PROCESS_MODE_MPS)
GS_ABI_CONST("enum values", NVML_PROCESS_MODE_ALL)
#endif

GS_ABI_CONST("sampling and value types", NVML_TOTAL_POWER_SAMPLES)
GS_ABI_CONST("sampling and value types", NVML_GPU_UTILIZATION_SAMPLES)
GS_ABI_CONST("sampling and value types", NVML_MEMORY_UTILIZATION_SAMPLES)
GS_ABI_CONST("sampling and value types", NVML_ENC_UTILIZATION_SAMPLES)
GS_ABI_CONST("sampling and value types", NVML_DEC_UTILIZATION_SAMPLES)
GS_ABI_CONST("sampling and value types", NVML_PROCESSOR_CLK_SAMPLES)
GS_ABI_CONST("sampling and value types", NVML_MEMORY_CLK_SAMPLES)
GS_ABI_CONST("sampling and value types", NVML_VALUE_TYPE_DOUBLE)
GS_ABI_CONST("sampling and value types", NVML_VALUE_TYPE_UNSIGNED_INT)
GS_ABI_CONST("sampling and value types", NVML_VALUE_TYPE_UNSIGNED_LONG)
GS_ABI_CONST("sampling and value types", NVML_VALUE_TYPE_UNSIGNED_LONG_LONG)
GS_ABI_CONST("sampling and value types", NVML_VALUE_TYPE_SIGNED_LONG_LONG)
#if GS_ABI_OPT(NVML_VALUE_TYPE_SIGNED_INT)
GS_ABI_CONST("sampling and value types", NVML_VALUE_TYPE_SIGNED_INT)
#endif
#if GS_ABI_OPT(NVML_VALUE_TYPE_UNSIGNED_SHORT)
GS_ABI_CONST("sampling and value types", NVML_VALUE_TYPE_UNSIGNED_SHORT)
#endif

GS_ABI_CONST("flags and buffer sizes", NVML_INIT_FLAG_NO_GPUS)
GS_ABI_CONST("flags and buffer sizes", NVML_INIT_FLAG_NO_ATTACH)
#if GS_ABI_OPT(NVML_INIT_FLAG_FORCE_INIT)
GS_ABI_CONST("flags and buffer sizes", NVML_INIT_FLAG_FORCE_INIT)
#endif
GS_ABI_CONST("flags and buffer sizes", NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE)
GS_ABI_CONST("flags and buffer sizes", NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE)
GS_ABI_CONST("flags and buffer sizes", NVML_DEVICE_NAME_BUFFER_SIZE)
GS_ABI_CONST("flags and buffer sizes", NVML_DEVICE_PART_NUMBER_BUFFER_SIZE)
#if GS_ABI_OPT(NVML_GSP_FIRMWARE_VERSION_BUF_SIZE)
GS_ABI_CONST("flags and buffer sizes", NVML_GSP_FIRMWARE_VERSION_BUF_SIZE)
#endif
GS_ABI_CONST("flags and buffer sizes", NVML_DEVICE_NAME_V2_BUFFER_SIZE)
GS_ABI_CONST("flags and buffer sizes", NVML_DEVICE_UUID_BUFFER_SIZE)
GS_ABI_CONST("flags and buffer sizes", NVML_DEVICE_UUID_V2_BUFFER_SIZE)
GS_ABI_CONST("flags and buffer sizes", NVML_DEVICE_SERIAL_BUFFER_SIZE)
GS_ABI_CONST("flags and buffer sizes", NVML_DEVICE_INFOROM_VERSION_BUFFER_SIZE)
GS_ABI_CONST("flags and buffer sizes", NVML_DEVICE_VBIOS_VERSION_BUFFER_SIZE)
GS_ABI_CONST("flags and buffer sizes", NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE)
GS_ABI_CONST("flags and buffer sizes", NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE)
/* nvml.h: (-1), compared against the 64-bit usedGpuMemory, i.e. all ones. */
GS_ABI_CONST("flags and buffer sizes", NVML_VALUE_NOT_AVAILABLE)
/* Documented in nvml.h as the 0xFFFFFFFF instance id with MIG off; no constant there. */
GS_ABI_OURS_ONLY("flags and buffer sizes", NVML_MIG_ID_NONE)

/* Renamed from nvmlClocksThrottleReason* in 535.43 with the same bits; older headers only
 * have the old names, newer ones keep them as aliases. */
#if GS_ABI_SIDE_OURS || GS_HAVE_nvmlClocksEventReasonGpuIdle
#define GS_ABI_REASON(name) GS_ABI_CONST("clock event reasons", nvmlClocksEventReason##name)
#else
#define GS_ABI_REASON(name)                                                                        \
    GS_ABI_CONST2("clock event reasons", "nvmlClocksEventReason" #name,                            \
                  nvmlClocksEventReason##name, nvmlClocksThrottleReason##name)
#endif
GS_ABI_REASON(GpuIdle)
GS_ABI_REASON(ApplicationsClocksSetting)
GS_ABI_REASON(SwPowerCap)
GS_ABI_REASON(HwSlowdown)
GS_ABI_REASON(SyncBoost)
GS_ABI_REASON(SwThermalSlowdown)
GS_ABI_REASON(HwThermalSlowdown)
GS_ABI_REASON(HwPowerBrakeSlowdown)
GS_ABI_REASON(DisplayClockSetting)

GS_ABI_CONST("event types", nvmlEventTypeSingleBitEccError)
GS_ABI_CONST("event types", nvmlEventTypeDoubleBitEccError)
GS_ABI_CONST("event types", nvmlEventTypePState)
GS_ABI_CONST("event types", nvmlEventTypeXidCriticalError)
GS_ABI_CONST("event types", nvmlEventMigConfigChange)

GS_ABI_CONST("field ids", NVML_FI_DEV_ECC_CURRENT)
GS_ABI_CONST("field ids", NVML_FI_DEV_ECC_PENDING)
GS_ABI_CONST("field ids", NVML_FI_DEV_ECC_SBE_VOL_TOTAL)
GS_ABI_CONST("field ids", NVML_FI_DEV_ECC_DBE_VOL_TOTAL)
GS_ABI_CONST("field ids", NVML_FI_DEV_ECC_SBE_AGG_TOTAL)
GS_ABI_CONST("field ids", NVML_FI_DEV_ECC_DBE_AGG_TOTAL)
GS_ABI_CONST("field ids", NVML_FI_DEV_PERF_POLICY_POWER)
GS_ABI_CONST("field ids", NVML_FI_DEV_PERF_POLICY_THERMAL)
GS_ABI_CONST("field ids", NVML_FI_DEV_PERF_POLICY_SYNC_BOOST)
GS_ABI_CONST("field ids", NVML_FI_DEV_MEMORY_TEMP)
GS_ABI_CONST("field ids", NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION)
GS_ABI_CONST("field ids", NVML_FI_DEV_PCIE_REPLAY_COUNTER)
GS_ABI_CONST("field ids", NVML_FI_DEV_PCIE_REPLAY_ROLLOVER_COUNTER)
GS_ABI_CONST("field ids", NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX)
GS_ABI_CONST("field ids", NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX)
GS_ABI_CONST("field ids", NVML_FI_DEV_NVLINK_THROUGHPUT_RAW_TX)
GS_ABI_CONST("field ids", NVML_FI_DEV_NVLINK_THROUGHPUT_RAW_RX)
GS_ABI_CONST("field ids", NVML_FI_DEV_NVLINK_SPEED_MBPS_L0)
GS_ABI_CONST("field ids", NVML_FI_DEV_NVLINK_SPEED_MBPS_L5)
GS_ABI_CONST("field ids", NVML_FI_DEV_NVLINK_SPEED_MBPS_L6)
GS_ABI_CONST("field ids", NVML_FI_DEV_NVLINK_SPEED_MBPS_L11)
GS_ABI_CONST("field ids", NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON)
GS_ABI_CONST("field ids", NVML_FI_DEV_NVLINK_LINK_COUNT)
GS_ABI_CONST("field ids", NVML_FI_DEV_REMAPPED_COR)
GS_ABI_CONST("field ids", NVML_FI_DEV_REMAPPED_UNC)
GS_ABI_CONST("field ids", NVML_FI_DEV_REMAPPED_PENDING)
GS_ABI_CONST("field ids", NVML_FI_DEV_REMAPPED_FAILURE)
#if GS_ABI_OPT(NVML_FI_DEV_POWER_AVERAGE)
GS_ABI_CONST("field ids", NVML_FI_DEV_POWER_AVERAGE)
#endif
#if GS_ABI_OPT(NVML_FI_DEV_POWER_INSTANT)
GS_ABI_CONST("field ids", NVML_FI_DEV_POWER_INSTANT)
#endif
#if GS_ABI_OPT(NVML_FI_DEV_POWER_MIN_LIMIT)
GS_ABI_CONST("field ids", NVML_FI_DEV_POWER_MIN_LIMIT)
#endif
#if GS_ABI_OPT(NVML_FI_DEV_POWER_MAX_LIMIT)
GS_ABI_CONST("field ids", NVML_FI_DEV_POWER_MAX_LIMIT)
#endif
#if GS_ABI_OPT(NVML_FI_DEV_POWER_DEFAULT_LIMIT)
GS_ABI_CONST("field ids", NVML_FI_DEV_POWER_DEFAULT_LIMIT)
#endif
#if GS_ABI_OPT(NVML_FI_DEV_POWER_CURRENT_LIMIT)
GS_ABI_CONST("field ids", NVML_FI_DEV_POWER_CURRENT_LIMIT)
#endif
#if GS_ABI_OPT(NVML_FI_DEV_ENERGY)
GS_ABI_CONST("field ids", NVML_FI_DEV_ENERGY)
#endif
#if GS_ABI_OPT(NVML_FI_DEV_POWER_REQUESTED_LIMIT)
GS_ABI_CONST("field ids", NVML_FI_DEV_POWER_REQUESTED_LIMIT)
#endif
#if GS_ABI_OPT(NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_THERM_SLOWDOWN)
GS_ABI_CONST("field ids", NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_THERM_SLOWDOWN)
#endif
#if GS_ABI_OPT(NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_THERM_SLOWDOWN)
GS_ABI_CONST("field ids", NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_THERM_SLOWDOWN)
#endif
#if GS_ABI_OPT(NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_POWER_BRAKE_SLOWDOWN)
GS_ABI_CONST("field ids", NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_POWER_BRAKE_SLOWDOWN)
#endif

GS_ABI_CONST("GPM", NVML_GPM_METRIC_GRAPHICS_UTIL)
GS_ABI_CONST("GPM", NVML_GPM_METRIC_SM_UTIL)
GS_ABI_CONST("GPM", NVML_GPM_METRIC_SM_OCCUPANCY)
GS_ABI_CONST("GPM", NVML_GPM_METRIC_INTEGER_UTIL)
GS_ABI_CONST("GPM", NVML_GPM_METRIC_ANY_TENSOR_UTIL)
GS_ABI_CONST("GPM", NVML_GPM_METRIC_DRAM_BW_UTIL)
GS_ABI_CONST("GPM", NVML_GPM_SUPPORT_VERSION)
GS_ABI_CONST("GPM", NVML_GPM_METRICS_GET_VERSION)

GS_ABI_CONST("struct versions", nvmlMemory_v2)
#if GS_ABI_OPT(nvmlTemperature_v1)
GS_ABI_CONST("struct versions", nvmlTemperature_v1)
#endif
#if GS_ABI_OPT(nvmlPciInfoExt_v1)
GS_ABI_CONST("struct versions", nvmlPciInfoExt_v1)
#endif
#if GS_ABI_OPT(nvmlRepairStatus_v1)
GS_ABI_CONST("struct versions", nvmlRepairStatus_v1)
#endif
#if GS_ABI_OPT(nvmlMarginTemperature_v1)
GS_ABI_CONST("struct versions", nvmlMarginTemperature_v1)
#endif
#if GS_ABI_OPT(nvmlProcessDetailList_v1)
GS_ABI_CONST("struct versions", nvmlProcessDetailList_v1)
#endif

/* The process-list buffer stride must hold the largest entry any header declares. */
GS_ABI_ATLEAST("process list stride", "GS_NVML_PROC_STRIDE_MAX >= sizeof(nvmlProcessInfo_v1_t)",
               GS_NVML_PROC_STRIDE_MAX, sizeof(nvmlProcessInfo_v1_t))
GS_ABI_ATLEAST("process list stride", "GS_NVML_PROC_STRIDE_MAX >= sizeof(nvmlProcessInfo_t)",
               GS_NVML_PROC_STRIDE_MAX, sizeof(nvmlProcessInfo_t))
#if GS_ABI_OPT(nvmlProcessDetail_v1_t)
GS_ABI_ATLEAST("process list stride", "GS_NVML_PROC_STRIDE_MAX >= sizeof(nvmlProcessDetail_v1_t)",
               GS_NVML_PROC_STRIDE_MAX, sizeof(nvmlProcessDetail_v1_t))
#endif

/* ---- prototypes of the symbols the backend resolves with dlsym -------------------------- */
GS_ABI_PROTO(nvmlReturn_t, nvmlInit_v2, (void))
GS_ABI_PROTO(nvmlReturn_t, nvmlInit, (void))
GS_ABI_PROTO(nvmlReturn_t, nvmlInitWithFlags, (unsigned int))
GS_ABI_PROTO(nvmlReturn_t, nvmlShutdown, (void))
GS_ABI_PROTO(const char *, nvmlErrorString, (nvmlReturn_t))
GS_ABI_PROTO(nvmlReturn_t, nvmlSystemGetDriverVersion, (char *, unsigned int))
GS_ABI_PROTO(nvmlReturn_t, nvmlSystemGetNVMLVersion, (char *, unsigned int))
GS_ABI_PROTO(nvmlReturn_t, nvmlSystemGetCudaDriverVersion, (int *))
GS_ABI_PROTO(nvmlReturn_t, nvmlSystemGetCudaDriverVersion_v2, (int *))
GS_ABI_PROTO(nvmlReturn_t, nvmlSystemGetProcessName, (unsigned int, char *, unsigned int))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetCount_v2, (unsigned int *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetCount, (unsigned int *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetHandleByIndex_v2, (unsigned int, nvmlDevice_t *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetHandleByIndex, (unsigned int, nvmlDevice_t *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetHandleByUUID, (const char *, nvmlDevice_t *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetHandleByPciBusId_v2, (const char *, nvmlDevice_t *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetName, (nvmlDevice_t, char *, unsigned int))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetUUID, (nvmlDevice_t, char *, unsigned int))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetSerial, (nvmlDevice_t, char *, unsigned int))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetVbiosVersion, (nvmlDevice_t, char *, unsigned int))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetIndex, (nvmlDevice_t, unsigned int *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetMinorNumber, (nvmlDevice_t, unsigned int *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetArchitecture, (nvmlDevice_t, nvmlDeviceArchitecture_t *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetBrand, (nvmlDevice_t, nvmlBrandType_t *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetPciInfo_v3, (nvmlDevice_t, nvmlPciInfo_t *))
#if GS_ABI_OPT(nvmlDeviceGetPciInfoExt)
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetPciInfoExt, (nvmlDevice_t, nvmlPciInfoExt_v1_t *))
#endif
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetInforomImageVersion, (nvmlDevice_t, char *, unsigned int))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetInforomVersion,
             (nvmlDevice_t, nvmlInforomObject_t, char *, unsigned int))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceValidateInforom, (nvmlDevice_t))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetDisplayMode, (nvmlDevice_t, nvmlEnableState_t *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetDisplayActive, (nvmlDevice_t, nvmlEnableState_t *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetAccountingMode, (nvmlDevice_t, nvmlEnableState_t *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetAccountingBufferSize, (nvmlDevice_t, unsigned int *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetGspFirmwareMode,
             (nvmlDevice_t, unsigned int *, unsigned int *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetUtilizationRates, (nvmlDevice_t, nvmlUtilization_t *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetMemoryInfo, (nvmlDevice_t, nvmlMemory_t *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetMemoryInfo_v2, (nvmlDevice_t, nvmlMemory_v2_t *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetBAR1MemoryInfo, (nvmlDevice_t, nvmlBAR1Memory_t *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetAttributes_v2, (nvmlDevice_t, nvmlDeviceAttributes_t *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetEncoderUtilization,
             (nvmlDevice_t, unsigned int *, unsigned int *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetDecoderUtilization,
             (nvmlDevice_t, unsigned int *, unsigned int *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetEncoderStats,
             (nvmlDevice_t, unsigned int *, unsigned int *, unsigned int *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetFBCStats, (nvmlDevice_t, nvmlFBCStats_t *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetBoardPartNumber, (nvmlDevice_t, char *, unsigned int))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetBoardId, (nvmlDevice_t, unsigned int *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetMultiGpuBoard, (nvmlDevice_t, unsigned int *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetMaxCustomerBoostClock,
             (nvmlDevice_t, nvmlClockType_t, unsigned int *))
#if GS_ABI_OPT(nvmlDeviceGetGspFirmwareVersion)
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetGspFirmwareVersion, (nvmlDevice_t, char *))
#endif
#if GS_ABI_OPT(nvmlDeviceGetRepairStatus)
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetRepairStatus, (nvmlDevice_t, nvmlRepairStatus_t *))
#endif
#if GS_ABI_OPT(nvmlDeviceGetJpgUtilization)
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetJpgUtilization,
             (nvmlDevice_t, unsigned int *, unsigned int *))
#endif
#if GS_ABI_OPT(nvmlDeviceGetOfaUtilization)
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetOfaUtilization,
             (nvmlDevice_t, unsigned int *, unsigned int *))
#endif
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetSamples,
             (nvmlDevice_t, nvmlSamplingType_t, unsigned long long, nvmlValueType_t *,
              unsigned int *, nvmlSample_t *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetTemperature,
             (nvmlDevice_t, nvmlTemperatureSensors_t, unsigned int *))
#if GS_ABI_OPT(nvmlTemperature_t)
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetTemperatureV, (nvmlDevice_t, nvmlTemperature_t *))
#endif
#if GS_ABI_OPT(nvmlDeviceGetMarginTemperature)
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetMarginTemperature,
             (nvmlDevice_t, nvmlMarginTemperature_t *))
#endif
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetTemperatureThreshold,
             (nvmlDevice_t, nvmlTemperatureThresholds_t, unsigned int *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetFanSpeed, (nvmlDevice_t, unsigned int *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetFanSpeed_v2, (nvmlDevice_t, unsigned int, unsigned int *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetNumFans, (nvmlDevice_t, unsigned int *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetPowerUsage, (nvmlDevice_t, unsigned int *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetEnforcedPowerLimit, (nvmlDevice_t, unsigned int *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetPowerManagementLimit, (nvmlDevice_t, unsigned int *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetPowerManagementLimitConstraints,
             (nvmlDevice_t, unsigned int *, unsigned int *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetPowerManagementDefaultLimit, (nvmlDevice_t, unsigned int *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetTotalEnergyConsumption,
             (nvmlDevice_t, unsigned long long *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetClockInfo, (nvmlDevice_t, nvmlClockType_t, unsigned int *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetMaxClockInfo,
             (nvmlDevice_t, nvmlClockType_t, unsigned int *))
#if GS_ABI_OPT(nvmlDeviceGetCurrentClocksEventReasons)
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetCurrentClocksEventReasons,
             (nvmlDevice_t, unsigned long long *))
#endif
#if GS_ABI_OPT(nvmlDeviceGetSupportedClocksEventReasons)
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetSupportedClocksEventReasons,
             (nvmlDevice_t, unsigned long long *))
#endif
#if GS_ABI_OPT(nvmlDeviceGetCurrentClocksThrottleReasons)
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetCurrentClocksThrottleReasons,
             (nvmlDevice_t, unsigned long long *))
#endif
#if GS_ABI_OPT(nvmlDeviceGetSupportedClocksThrottleReasons)
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetSupportedClocksThrottleReasons,
             (nvmlDevice_t, unsigned long long *))
#endif
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetPerformanceState, (nvmlDevice_t, nvmlPstates_t *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetCurrPcieLinkGeneration, (nvmlDevice_t, unsigned int *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetCurrPcieLinkWidth, (nvmlDevice_t, unsigned int *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetMaxPcieLinkGeneration, (nvmlDevice_t, unsigned int *))
#if GS_ABI_OPT(nvmlDeviceGetGpuMaxPcieLinkGeneration)
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetGpuMaxPcieLinkGeneration, (nvmlDevice_t, unsigned int *))
#endif
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetMaxPcieLinkWidth, (nvmlDevice_t, unsigned int *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetPcieThroughput,
             (nvmlDevice_t, nvmlPcieUtilCounter_t, unsigned int *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetPcieReplayCounter, (nvmlDevice_t, unsigned int *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetNvLinkState,
             (nvmlDevice_t, unsigned int, nvmlEnableState_t *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetNvLinkErrorCounter,
             (nvmlDevice_t, unsigned int, nvmlNvLinkErrorCounter_t, unsigned long long *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetNvLinkRemotePciInfo_v2,
             (nvmlDevice_t, unsigned int, nvmlPciInfo_t *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetNvLinkCapability,
             (nvmlDevice_t, unsigned int, nvmlNvLinkCapability_t, unsigned int *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetNvLinkRemoteDeviceType,
             (nvmlDevice_t, unsigned int, nvmlIntNvLinkDeviceType_t *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetTopologyCommonAncestor,
             (nvmlDevice_t, nvmlDevice_t, nvmlGpuTopologyLevel_t *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetCpuAffinity, (nvmlDevice_t, unsigned int, unsigned long *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetMemoryAffinity,
             (nvmlDevice_t, unsigned int, unsigned long *, nvmlAffinityScope_t))
#if GS_ABI_OPT(nvmlDeviceGetNumaNodeId)
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetNumaNodeId, (nvmlDevice_t, unsigned int *))
#endif
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetFieldValues, (nvmlDevice_t, int, nvmlFieldValue_t *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetComputeRunningProcesses,
             (nvmlDevice_t, unsigned int *, nvmlProcessInfo_v1_t *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetGraphicsRunningProcesses,
             (nvmlDevice_t, unsigned int *, nvmlProcessInfo_v1_t *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetMPSComputeRunningProcesses,
             (nvmlDevice_t, unsigned int *, nvmlProcessInfo_v1_t *))
#if GS_ABI_OPT(nvmlProcessInfo_v2_t)
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetComputeRunningProcesses_v2,
             (nvmlDevice_t, unsigned int *, nvmlProcessInfo_v2_t *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetGraphicsRunningProcesses_v2,
             (nvmlDevice_t, unsigned int *, nvmlProcessInfo_v2_t *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetMPSComputeRunningProcesses_v2,
             (nvmlDevice_t, unsigned int *, nvmlProcessInfo_v2_t *))
#endif
/* _v3 takes the header's nvmlProcessInfo_t, i.e. GS_ABI_PROC_V3 on our side (see above). */
GS_ABI_PROTO_K(
    "nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t, unsigned int *, nvmlProcessInfo_t *)",
    nvmlReturn_t, nvmlDeviceGetComputeRunningProcesses_v3,
    (nvmlDevice_t, unsigned int *, GS_ABI_PICK(GS_ABI_PROC_V3, nvmlProcessInfo_t) *))
GS_ABI_PROTO_K(
    "nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t, unsigned int *, nvmlProcessInfo_t *)",
    nvmlReturn_t, nvmlDeviceGetGraphicsRunningProcesses_v3,
    (nvmlDevice_t, unsigned int *, GS_ABI_PICK(GS_ABI_PROC_V3, nvmlProcessInfo_t) *))
GS_ABI_PROTO_K(
    "nvmlDeviceGetMPSComputeRunningProcesses_v3(nvmlDevice_t, unsigned int *, nvmlProcessInfo_t *)",
    nvmlReturn_t, nvmlDeviceGetMPSComputeRunningProcesses_v3,
    (nvmlDevice_t, unsigned int *, GS_ABI_PICK(GS_ABI_PROC_V3, nvmlProcessInfo_t) *))
#if GS_ABI_OPT(nvmlDeviceGetRunningProcessDetailList)
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetRunningProcessDetailList,
             (nvmlDevice_t, nvmlProcessDetailList_t *))
#endif
#if GS_ABI_OPT(nvmlDeviceGetConfComputeMemSizeInfo)
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetConfComputeMemSizeInfo,
             (nvmlDevice_t, nvmlConfComputeMemSizeInfo_t *))
#endif
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetProcessUtilization,
             (nvmlDevice_t, nvmlProcessUtilizationSample_t *, unsigned int *, unsigned long long))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetComputeMode, (nvmlDevice_t, nvmlComputeMode_t *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetPersistenceMode, (nvmlDevice_t, nvmlEnableState_t *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetEccMode,
             (nvmlDevice_t, nvmlEnableState_t *, nvmlEnableState_t *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetTotalEccErrors,
             (nvmlDevice_t, nvmlMemoryErrorType_t, nvmlEccCounterType_t, unsigned long long *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetMemoryErrorCounter,
             (nvmlDevice_t, nvmlMemoryErrorType_t, nvmlEccCounterType_t, nvmlMemoryLocation_t,
              unsigned long long *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetRetiredPages,
             (nvmlDevice_t, nvmlPageRetirementCause_t, unsigned int *, unsigned long long *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetRetiredPagesPendingStatus,
             (nvmlDevice_t, nvmlEnableState_t *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetRemappedRows,
             (nvmlDevice_t, unsigned int *, unsigned int *, unsigned int *, unsigned int *))
GS_ABI_PROTO(nvmlReturn_t, nvmlEventSetCreate, (nvmlEventSet_t *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceRegisterEvents,
             (nvmlDevice_t, unsigned long long, nvmlEventSet_t))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetSupportedEventTypes, (nvmlDevice_t, unsigned long long *))
GS_ABI_PROTO(nvmlReturn_t, nvmlEventSetWait_v2, (nvmlEventSet_t, nvmlEventData_t *, unsigned int))
GS_ABI_PROTO(nvmlReturn_t, nvmlEventSetFree, (nvmlEventSet_t))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetMigMode, (nvmlDevice_t, unsigned int *, unsigned int *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetMaxMigDeviceCount, (nvmlDevice_t, unsigned int *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetMigDeviceHandleByIndex,
             (nvmlDevice_t, unsigned int, nvmlDevice_t *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetDeviceHandleFromMigDeviceHandle,
             (nvmlDevice_t, nvmlDevice_t *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceIsMigDeviceHandle, (nvmlDevice_t, unsigned int *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetGpuInstanceId, (nvmlDevice_t, unsigned int *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetComputeInstanceId, (nvmlDevice_t, unsigned int *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetGpuInstanceById,
             (nvmlDevice_t, unsigned int, nvmlGpuInstance_t *))
GS_ABI_PROTO(nvmlReturn_t, nvmlGpuInstanceGetInfo, (nvmlGpuInstance_t, nvmlGpuInstanceInfo_t *))
GS_ABI_PROTO(nvmlReturn_t, nvmlGpmQueryDeviceSupport, (nvmlDevice_t, nvmlGpmSupport_t *))
GS_ABI_PROTO(nvmlReturn_t, nvmlGpmSampleAlloc, (nvmlGpmSample_t *))
GS_ABI_PROTO(nvmlReturn_t, nvmlGpmSampleFree, (nvmlGpmSample_t))
GS_ABI_PROTO(nvmlReturn_t, nvmlGpmSampleGet, (nvmlDevice_t, nvmlGpmSample_t))
#if GS_ABI_OPT(nvmlGpmMigSampleGet)
GS_ABI_PROTO(nvmlReturn_t, nvmlGpmMigSampleGet, (nvmlDevice_t, unsigned int, nvmlGpmSample_t))
#endif
/* Our nvmlGpmMetricsGet_t is larger (MAX 333); the pointer type is what must agree. */
GS_ABI_PROTO(nvmlReturn_t, nvmlGpmMetricsGet, (nvmlGpmMetricsGet_t *))

/* ---- -q detail readings (GS_WANT_DETAIL) ------------------------------------------------- */
GS_ABI_TYPE("types", nvmlGpuVirtualizationMode_t)
GS_ABI_TYPE("types", nvmlHostVgpuMode_t)
GS_ABI_CONST("enum values", NVML_GPU_VIRTUALIZATION_MODE_NONE)
GS_ABI_CONST("enum values", NVML_GPU_VIRTUALIZATION_MODE_PASSTHROUGH)
GS_ABI_CONST("enum values", NVML_GPU_VIRTUALIZATION_MODE_VGPU)
GS_ABI_CONST("enum values", NVML_GPU_VIRTUALIZATION_MODE_HOST_VGPU)
GS_ABI_CONST("enum values", NVML_GPU_VIRTUALIZATION_MODE_HOST_VSGA)
GS_ABI_CONST("enum values", NVML_HOST_VGPU_MODE_NON_SRIOV)
GS_ABI_CONST("enum values", NVML_HOST_VGPU_MODE_SRIOV)
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetVirtualizationMode,
             (nvmlDevice_t, nvmlGpuVirtualizationMode_t *))
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetHostVgpuMode, (nvmlDevice_t, nvmlHostVgpuMode_t *))

GS_ABI_STRUCT(nvmlRowRemapperHistogramValues_t)
GS_ABI_FIELD(nvmlRowRemapperHistogramValues_t, max)
GS_ABI_FIELD(nvmlRowRemapperHistogramValues_t, high)
GS_ABI_FIELD(nvmlRowRemapperHistogramValues_t, partial)
GS_ABI_FIELD(nvmlRowRemapperHistogramValues_t, low)
GS_ABI_FIELD(nvmlRowRemapperHistogramValues_t, none)
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetRowRemapperHistogram,
             (nvmlDevice_t, nvmlRowRemapperHistogramValues_t *))

/* nvmlDeviceGetAddressingMode (NVML 12.8+) */
#if GS_ABI_OPT(nvmlDeviceAddressingMode_t)
GS_ABI_STRUCT(nvmlDeviceAddressingMode_t)
GS_ABI_FIELD(nvmlDeviceAddressingMode_t, version)
GS_ABI_FIELD(nvmlDeviceAddressingMode_t, value)
#endif
#if GS_ABI_OPT(nvmlDeviceAddressingMode_v1)
GS_ABI_CONST("struct versions", nvmlDeviceAddressingMode_v1)
#endif
#if GS_ABI_OPT(NVML_DEVICE_ADDRESSING_MODE_ATS)
GS_ABI_CONST("enum values", NVML_DEVICE_ADDRESSING_MODE_NONE)
GS_ABI_CONST("enum values", NVML_DEVICE_ADDRESSING_MODE_HMM)
GS_ABI_CONST("enum values", NVML_DEVICE_ADDRESSING_MODE_ATS)
#endif
#if GS_ABI_OPT(nvmlDeviceGetAddressingMode)
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetAddressingMode,
             (nvmlDevice_t, nvmlDeviceAddressingMode_t *))
#endif

/* nvmlDeviceGetC2cModeInfoV */
#if GS_ABI_OPT(nvmlC2cModeInfo_v1_t)
GS_ABI_STRUCT(nvmlC2cModeInfo_v1_t)
GS_ABI_FIELD(nvmlC2cModeInfo_v1_t, isC2cEnabled)
#endif
#if GS_ABI_OPT(nvmlDeviceGetC2cModeInfoV)
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetC2cModeInfoV, (nvmlDevice_t, nvmlC2cModeInfo_v1_t *))
#endif

/* nvmlDeviceGetCapabilities (NVML 12.8+) */
#if GS_ABI_OPT(nvmlDeviceCapabilities_t)
GS_ABI_STRUCT(nvmlDeviceCapabilities_t)
GS_ABI_FIELD(nvmlDeviceCapabilities_t, version)
GS_ABI_FIELD(nvmlDeviceCapabilities_t, capMask)
#endif
#if GS_ABI_OPT(nvmlDeviceCapabilities_v1)
GS_ABI_CONST("struct versions", nvmlDeviceCapabilities_v1)
#endif
#if GS_ABI_OPT(NVML_DEV_CAP_EGM)
GS_ABI_CONST("flags and buffer sizes", NVML_DEV_CAP_EGM)
#endif
#if GS_ABI_OPT(nvmlDeviceGetCapabilities)
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetCapabilities, (nvmlDevice_t, nvmlDeviceCapabilities_t *))
#endif

/* nvmlDeviceGetSramEccErrorStatus (NVML 12.4+) */
#if GS_ABI_OPT(nvmlEccSramErrorStatus_t)
GS_ABI_STRUCT(nvmlEccSramErrorStatus_t)
GS_ABI_FIELD(nvmlEccSramErrorStatus_t, version)
GS_ABI_FIELD(nvmlEccSramErrorStatus_t, aggregateUncParity)
GS_ABI_FIELD(nvmlEccSramErrorStatus_t, aggregateUncSecDed)
GS_ABI_FIELD(nvmlEccSramErrorStatus_t, aggregateCor)
GS_ABI_FIELD(nvmlEccSramErrorStatus_t, volatileUncParity)
GS_ABI_FIELD(nvmlEccSramErrorStatus_t, volatileUncSecDed)
GS_ABI_FIELD(nvmlEccSramErrorStatus_t, volatileCor)
GS_ABI_FIELD(nvmlEccSramErrorStatus_t, aggregateUncBucketL2)
GS_ABI_FIELD(nvmlEccSramErrorStatus_t, aggregateUncBucketSm)
GS_ABI_FIELD(nvmlEccSramErrorStatus_t, aggregateUncBucketPcie)
GS_ABI_FIELD(nvmlEccSramErrorStatus_t, aggregateUncBucketMcu)
GS_ABI_FIELD(nvmlEccSramErrorStatus_t, aggregateUncBucketOther)
GS_ABI_FIELD(nvmlEccSramErrorStatus_t, bThresholdExceeded)
#endif
#if GS_ABI_OPT(nvmlEccSramErrorStatus_v1)
GS_ABI_CONST("struct versions", nvmlEccSramErrorStatus_v1)
#endif
#if GS_ABI_OPT(nvmlDeviceGetSramEccErrorStatus)
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetSramEccErrorStatus,
             (nvmlDevice_t, nvmlEccSramErrorStatus_t *))
#endif

/* nvmlDeviceGetGpuFabricInfoV, version 3 */
#if GS_ABI_OPT(NVML_GPU_FABRIC_UUID_LEN)
GS_ABI_CONST("flags and buffer sizes", NVML_GPU_FABRIC_UUID_LEN)
GS_ABI_CONST("enum values", NVML_GPU_FABRIC_STATE_NOT_SUPPORTED)
GS_ABI_CONST("enum values", NVML_GPU_FABRIC_STATE_NOT_STARTED)
GS_ABI_CONST("enum values", NVML_GPU_FABRIC_STATE_IN_PROGRESS)
GS_ABI_CONST("enum values", NVML_GPU_FABRIC_STATE_COMPLETED)
#endif
#if GS_ABI_OPT(nvmlGpuFabricState_t)
GS_ABI_TYPE("types", nvmlGpuFabricState_t)
#endif
#if GS_ABI_OPT(nvmlGpuFabricInfo_v3_t)
GS_ABI_STRUCT(nvmlGpuFabricInfo_v3_t)
GS_ABI_FIELD(nvmlGpuFabricInfo_v3_t, version)
GS_ABI_FIELD(nvmlGpuFabricInfo_v3_t, clusterUuid)
GS_ABI_FIELD(nvmlGpuFabricInfo_v3_t, status)
GS_ABI_FIELD(nvmlGpuFabricInfo_v3_t, cliqueId)
GS_ABI_FIELD(nvmlGpuFabricInfo_v3_t, state)
GS_ABI_FIELD(nvmlGpuFabricInfo_v3_t, healthMask)
GS_ABI_FIELD(nvmlGpuFabricInfo_v3_t, healthSummary)
#endif
#if GS_ABI_OPT(nvmlGpuFabricInfo_v3)
GS_ABI_CONST("struct versions", nvmlGpuFabricInfo_v3)
#endif
#if GS_ABI_OPT(nvmlDeviceGetGpuFabricInfoV)
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetGpuFabricInfoV, (nvmlDevice_t, nvmlGpuFabricInfo_v3_t *))
#endif
/* its health mask (one field per condition) and health summary */
#if GS_ABI_OPT(NVML_GPU_FABRIC_HEALTH_MASK_WIDTH_INCORRECT_CONFIGURATION)
GS_ABI_CONST("flags and buffer sizes", NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_DEGRADED_BW)
GS_ABI_CONST("flags and buffer sizes", NVML_GPU_FABRIC_HEALTH_MASK_WIDTH_DEGRADED_BW)
GS_ABI_CONST("enum values", NVML_GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_NOT_SUPPORTED)
GS_ABI_CONST("enum values", NVML_GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_TRUE)
GS_ABI_CONST("enum values", NVML_GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_FALSE)
GS_ABI_CONST("flags and buffer sizes", NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_ROUTE_RECOVERY)
GS_ABI_CONST("flags and buffer sizes", NVML_GPU_FABRIC_HEALTH_MASK_WIDTH_ROUTE_RECOVERY)
GS_ABI_CONST("enum values", NVML_GPU_FABRIC_HEALTH_MASK_ROUTE_RECOVERY_NOT_SUPPORTED)
GS_ABI_CONST("enum values", NVML_GPU_FABRIC_HEALTH_MASK_ROUTE_RECOVERY_TRUE)
GS_ABI_CONST("enum values", NVML_GPU_FABRIC_HEALTH_MASK_ROUTE_RECOVERY_FALSE)
GS_ABI_CONST("flags and buffer sizes", NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_ROUTE_UNHEALTHY)
GS_ABI_CONST("flags and buffer sizes", NVML_GPU_FABRIC_HEALTH_MASK_WIDTH_ROUTE_UNHEALTHY)
GS_ABI_CONST("enum values", NVML_GPU_FABRIC_HEALTH_MASK_ROUTE_UNHEALTHY_NOT_SUPPORTED)
GS_ABI_CONST("enum values", NVML_GPU_FABRIC_HEALTH_MASK_ROUTE_UNHEALTHY_TRUE)
GS_ABI_CONST("enum values", NVML_GPU_FABRIC_HEALTH_MASK_ROUTE_UNHEALTHY_FALSE)
GS_ABI_CONST("flags and buffer sizes", NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_ACCESS_TIMEOUT_RECOVERY)
GS_ABI_CONST("flags and buffer sizes", NVML_GPU_FABRIC_HEALTH_MASK_WIDTH_ACCESS_TIMEOUT_RECOVERY)
GS_ABI_CONST("enum values", NVML_GPU_FABRIC_HEALTH_MASK_ACCESS_TIMEOUT_RECOVERY_NOT_SUPPORTED)
GS_ABI_CONST("enum values", NVML_GPU_FABRIC_HEALTH_MASK_ACCESS_TIMEOUT_RECOVERY_TRUE)
GS_ABI_CONST("enum values", NVML_GPU_FABRIC_HEALTH_MASK_ACCESS_TIMEOUT_RECOVERY_FALSE)
GS_ABI_CONST("flags and buffer sizes", NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_INCORRECT_CONFIGURATION)
GS_ABI_CONST("flags and buffer sizes", NVML_GPU_FABRIC_HEALTH_MASK_WIDTH_INCORRECT_CONFIGURATION)
GS_ABI_CONST("enum values", NVML_GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_NOT_SUPPORTED)
GS_ABI_CONST("enum values", NVML_GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_NONE)
GS_ABI_CONST("enum values", NVML_GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_INCORRECT_SYSGUID)
GS_ABI_CONST("enum values",
             NVML_GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_INCORRECT_CHASSIS_SN)
GS_ABI_CONST("enum values", NVML_GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_NO_PARTITION)
GS_ABI_CONST("enum values",
             NVML_GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_INSUFFICIENT_NVLINKS)
GS_ABI_CONST("enum values", NVML_GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_INCOMPATIBLE_GPU_FW)
GS_ABI_CONST("enum values", NVML_GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_INVALID_LOCATION)
GS_ABI_CONST("enum values", NVML_GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_GPU_STATE_INVALID)
#endif
#if GS_ABI_OPT(NVML_GPU_FABRIC_HEALTH_MASK_WIDTH_PARTITION_ASSIGNED)
GS_ABI_CONST("flags and buffer sizes", NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_PARTITION_ASSIGNED)
GS_ABI_CONST("flags and buffer sizes", NVML_GPU_FABRIC_HEALTH_MASK_WIDTH_PARTITION_ASSIGNED)
GS_ABI_CONST("enum values", NVML_GPU_FABRIC_HEALTH_MASK_PARTITION_ASSIGNED_NOT_SUPPORTED)
GS_ABI_CONST("enum values", NVML_GPU_FABRIC_HEALTH_MASK_PARTITION_ASSIGNED_TRUE)
GS_ABI_CONST("enum values", NVML_GPU_FABRIC_HEALTH_MASK_PARTITION_ASSIGNED_FALSE)
#endif
#if GS_ABI_OPT(NVML_GPU_FABRIC_HEALTH_SUMMARY_LIMITED_CAPACITY)
GS_ABI_CONST("enum values", NVML_GPU_FABRIC_HEALTH_SUMMARY_NOT_SUPPORTED)
GS_ABI_CONST("enum values", NVML_GPU_FABRIC_HEALTH_SUMMARY_HEALTHY)
GS_ABI_CONST("enum values", NVML_GPU_FABRIC_HEALTH_SUMMARY_UNHEALTHY)
GS_ABI_CONST("enum values", NVML_GPU_FABRIC_HEALTH_SUMMARY_LIMITED_CAPACITY)
#endif

/* power scopes (scopeId of the power field values) and the recovery action field */
#if GS_ABI_OPT(NVML_POWER_SCOPE_MEMORY)
GS_ABI_CONST("flags and buffer sizes", NVML_POWER_SCOPE_GPU)
GS_ABI_CONST("flags and buffer sizes", NVML_POWER_SCOPE_MODULE)
GS_ABI_CONST("flags and buffer sizes", NVML_POWER_SCOPE_MEMORY)
#endif
#if GS_ABI_OPT(NVML_FI_DEV_TEMPERATURE_SHUTDOWN_TLIMIT)
GS_ABI_CONST("field ids", NVML_FI_DEV_TEMPERATURE_SHUTDOWN_TLIMIT)
GS_ABI_CONST("field ids", NVML_FI_DEV_TEMPERATURE_SLOWDOWN_TLIMIT)
GS_ABI_CONST("field ids", NVML_FI_DEV_TEMPERATURE_MEM_MAX_TLIMIT)
GS_ABI_CONST("field ids", NVML_FI_DEV_TEMPERATURE_GPU_MAX_TLIMIT)
#endif
#if GS_ABI_OPT(NVML_FI_DEV_EDPP_MULTIPLIER)
GS_ABI_CONST("field ids", NVML_FI_DEV_EDPP_MULTIPLIER)
#endif
#if GS_ABI_OPT(NVML_FI_DEV_REMAPPED_ROWS_COR_INACTIVE)
GS_ABI_CONST("field ids", NVML_FI_DEV_REMAPPED_ROWS_COR_INACTIVE)
GS_ABI_CONST("field ids", NVML_FI_DEV_REMAPPED_ROWS_UNC_INACTIVE)
#endif
#if GS_ABI_OPT(NVML_FI_DEV_GET_GPU_RECOVERY_ACTION)
GS_ABI_CONST("field ids", NVML_FI_DEV_GET_GPU_RECOVERY_ACTION)
#endif
#if GS_ABI_OPT(NVML_GPU_RECOVERY_ACTION_DRAIN_AND_RESET)
GS_ABI_CONST("enum values", NVML_GPU_RECOVERY_ACTION_NONE)
GS_ABI_CONST("enum values", NVML_GPU_RECOVERY_ACTION_GPU_RESET)
GS_ABI_CONST("enum values", NVML_GPU_RECOVERY_ACTION_NODE_REBOOT)
GS_ABI_CONST("enum values", NVML_GPU_RECOVERY_ACTION_DRAIN_P2P)
GS_ABI_CONST("enum values", NVML_GPU_RECOVERY_ACTION_DRAIN_AND_RESET)
#endif

/* ---- -q whole-GPU rows (GS_WANT_DETAIL): PDI, module id, GOM, vGPU heterogeneous mode, PCIe
 * atomics, protected memory, unrepairable memory ----------------------------------------------- */
GS_ABI_TYPE("types", nvmlGpuOperationMode_t)
GS_ABI_CONST("enum values", NVML_GOM_ALL_ON)
GS_ABI_CONST("enum values", NVML_GOM_COMPUTE)
GS_ABI_CONST("enum values", NVML_GOM_LOW_DP)
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetGpuOperationMode,
             (nvmlDevice_t, nvmlGpuOperationMode_t *, nvmlGpuOperationMode_t *))

/* nvmlDeviceGetPdi (NVML 13.0+) */
#if GS_ABI_OPT(nvmlPdi_t)
GS_ABI_STRUCT(nvmlPdi_t)
GS_ABI_FIELD(nvmlPdi_t, version)
GS_ABI_FIELD(nvmlPdi_t, value)
#endif
#if GS_ABI_OPT(nvmlPdi_v1)
GS_ABI_CONST("struct versions", nvmlPdi_v1)
#endif
#if GS_ABI_OPT(nvmlDeviceGetPdi)
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetPdi, (nvmlDevice_t, nvmlPdi_t *))
#endif

/* nvmlDeviceGetModuleId, nvmlDeviceGetConfComputeProtectedMemoryUsage (NVML 12.2+) */
#if GS_ABI_OPT(nvmlDeviceGetModuleId)
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetModuleId, (nvmlDevice_t, unsigned int *))
#endif

/* nvmlDeviceGetVgpuHeterogeneousMode (NVML 12.4+) */
#if GS_ABI_OPT(nvmlVgpuHeterogeneousMode_t)
GS_ABI_STRUCT(nvmlVgpuHeterogeneousMode_t)
GS_ABI_FIELD(nvmlVgpuHeterogeneousMode_t, version)
GS_ABI_FIELD(nvmlVgpuHeterogeneousMode_t, mode)
#endif
#if GS_ABI_OPT(nvmlVgpuHeterogeneousMode_v1)
GS_ABI_CONST("struct versions", nvmlVgpuHeterogeneousMode_v1)
#endif
#if GS_ABI_OPT(nvmlDeviceGetVgpuHeterogeneousMode)
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetVgpuHeterogeneousMode,
             (nvmlDevice_t, nvmlVgpuHeterogeneousMode_t *))
#endif

#if GS_ABI_OPT(nvmlDeviceGetConfComputeProtectedMemoryUsage)
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetConfComputeProtectedMemoryUsage,
             (nvmlDevice_t, nvmlMemory_t *))
#endif

/* nvmlDeviceGetUnrepairableMemoryFlag_v1 (NVML 13.1+) */
#if GS_ABI_OPT(nvmlUnrepairableMemoryStatus_v1_t)
GS_ABI_STRUCT(nvmlUnrepairableMemoryStatus_v1_t)
GS_ABI_FIELD(nvmlUnrepairableMemoryStatus_v1_t, bUnrepairableMemory)
#endif
#if GS_ABI_OPT(nvmlDeviceGetUnrepairableMemoryFlag_v1)
GS_ABI_PROTO(nvmlReturn_t, nvmlDeviceGetUnrepairableMemoryFlag_v1,
             (nvmlDevice_t, nvmlUnrepairableMemoryStatus_v1_t *))
#endif

/* PCIe atomics (NVML 12.6+): field ids 228/229 and their mask bits */
#if GS_ABI_OPT(NVML_FI_DEV_PCIE_OUTBOUND_ATOMICS_MASK)
GS_ABI_CONST("field ids", NVML_FI_DEV_PCIE_OUTBOUND_ATOMICS_MASK)
GS_ABI_CONST("field ids", NVML_FI_DEV_PCIE_INBOUND_ATOMICS_MASK)
#endif
#if GS_ABI_OPT(NVML_PCIE_ATOMICS_CAP_CAS128)
GS_ABI_CONST("flags and buffer sizes", NVML_PCIE_ATOMICS_CAP_FETCHADD32)
GS_ABI_CONST("flags and buffer sizes", NVML_PCIE_ATOMICS_CAP_FETCHADD64)
GS_ABI_CONST("flags and buffer sizes", NVML_PCIE_ATOMICS_CAP_SWAP32)
GS_ABI_CONST("flags and buffer sizes", NVML_PCIE_ATOMICS_CAP_SWAP64)
GS_ABI_CONST("flags and buffer sizes", NVML_PCIE_ATOMICS_CAP_CAS32)
GS_ABI_CONST("flags and buffer sizes", NVML_PCIE_ATOMICS_CAP_CAS64)
GS_ABI_CONST("flags and buffer sizes", NVML_PCIE_ATOMICS_CAP_CAS128)
GS_ABI_CONST("flags and buffer sizes", NVML_PCIE_ATOMICS_OPS_MAX)
#endif
/* PCIe byte counters (NVML 12.x; the sampler's throughput without the 20 ms window): field ids
 * 197/198 */
#if GS_ABI_OPT(NVML_FI_DEV_PCIE_COUNT_TX_BYTES)
GS_ABI_CONST("field ids", NVML_FI_DEV_PCIE_COUNT_TX_BYTES)
GS_ABI_CONST("field ids", NVML_FI_DEV_PCIE_COUNT_RX_BYTES)
#endif
