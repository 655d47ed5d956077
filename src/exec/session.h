/* Internal view of a session, for the CLI and tests. */
#ifndef SN_EXEC_SESSION_H
#define SN_EXEC_SESSION_H

#include "exec/exec.h"
#include "graph/graph.h"
#include "onnx/model.h"

typedef struct sn_session {
    sn_model *model;  /* owned */
    sn_graph *graph;  /* owned */
    sn_pool *pool;    /* owned */
    sn_exec *exec;    /* owned */
    sn_logger log;
    sn_err err;       /* last error of the public API */
} sn_session;

int sn_session_open(const char *path, const snug_options *opts, sn_session **out, sn_err *err);
void sn_session_close(sn_session *s);

/* Online CPUs (at least 1). */
int sn_cpu_count(void);

#endif
