/*
 * Error codes and the error record every fallible gpuscope function fills.
 *
 * Fallible functions return GS_OK (0) or a negative enum gs_rc and, when `err` is not NULL,
 * leave a one-line message naming the object and the call that failed
 * ("nvml: nvmlDeviceGetPowerUsage(gpu 3): GPU is lost"). Only main() turns a code into an
 * exit status (gs_rc_exit_code), so library code never exits.
 */
#ifndef GS_ERR_H
#define GS_ERR_H

enum gs_rc {
    GS_OK = 0,
    GS_ENOMEM = -1,     /* out of memory */
    GS_EINVAL = -2,     /* bad argument or input */
    GS_ENOLIB = -3,     /* libnvidia-ml.so.1 not found or not loadable */
    GS_ENODRIVER = -4,  /* NVIDIA kernel driver not loaded */
    GS_EMISMATCH = -5,  /* driver/library version mismatch */
    GS_ENOGPU = -6,     /* zero GPUs, or the requested GPU does not exist */
    GS_ELOST = -7,      /* GPU fell off the bus */
    GS_ENOTSUP = -8,    /* not supported by this device or driver */
    GS_EPERM = -9,      /* insufficient permissions */
    GS_EIO = -10,       /* operating-system I/O error */
    GS_ENOTFOUND = -11, /* no such object (pid, file, field) */
    GS_EPARSE = -12,    /* malformed input (scenario, config, record) */
    GS_ENVML = -13,     /* any other NVML failure */
    GS_EUSAGE = -14,    /* bad command-line usage */
};

#define GS_ERR_MSG_LEN 512

struct gs_err {
    int rc;
    char msg[GS_ERR_MSG_LEN];
};

/* Records rc and a printf-style message in err (when not NULL); returns rc so a caller can
 * write `return gs_err_set(err, GS_EINVAL, "...")`. */
int gs_err_set(struct gs_err *err, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Clears err to GS_OK with an empty message; NULL is allowed. */
void gs_err_clear(struct gs_err *err);

/* A short static description of a code ("GPU is lost"). */
const char *gs_strerror(int rc);

/* The process exit status for a code. Follows nvidia-smi's documented return values so that
 * scripts written for it behave the same: 0 ok, 2 invalid argument, 3 not supported,
 * 4 no permission, 6 not found / no GPUs, 9 driver not loaded, 12 library not found,
 * 15 GPU lost, 18 version mismatch, 255 other. */
int gs_rc_exit_code(int rc);

/* Exit statuses of every command besides gs_rc_exit_code's NVML-like ones. */
#define GS_EXIT_OK 0
#define GS_EXIT_USAGE 2

#endif
