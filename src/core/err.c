#include <stdio.h>
#include <string.h>

#include "core/core.h"

int sn_errf(sn_err *err, int code, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->code = code;
    }
    return code;
}

int sn_err_prefix(sn_err *err, const char *fmt, ...) {
    if (!err)
        return SNUG_ERR_INTERNAL;
    char pre[512], old[sizeof err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pre, sizeof pre, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    size_t np = strlen(pre);
    if (np > sizeof err->msg - 3)
        np = sizeof err->msg - 3;
    memcpy(err->msg, pre, np);
    memcpy(err->msg + np, ": ", 2);
    size_t room = sizeof err->msg - np - 3, no = strnlen(old, room);
    memcpy(err->msg + np + 2, old, no);
    err->msg[np + 2 + no] = 0;
    return err->code;
}

const char *snug_status_str(int status) {
    switch (status) {
    case SNUG_OK: return "ok";
    case SNUG_ERR_INVALID_ARG: return "invalid argument";
    case SNUG_ERR_IO: return "i/o error";
    case SNUG_ERR_PARSE: return "malformed input";
    case SNUG_ERR_UNSUPPORTED: return "unsupported";
    case SNUG_ERR_OOM: return "out of memory";
    case SNUG_ERR_SHAPE: return "shape error";
    case SNUG_ERR_TYPE: return "type error";
    case SNUG_ERR_GRAPH: return "invalid graph";
    case SNUG_ERR_RANGE: return "out of range";
    case SNUG_ERR_INTERNAL: return "internal error";
    default: return "unknown status";
    }
}

void sn_log(const sn_logger *lg, int level, const char *fmt, ...) {
    if (!lg || !lg->fn || level > lg->level)
        return;
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    lg->fn(lg->user, level, buf);
}

uint64_t sn_hash_str(const char *s) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ull;
    }
    return h;
}
