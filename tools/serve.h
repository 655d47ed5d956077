/* snug serve's requests (tools/snug_serve.c): a completion request's JSON
 * body into a job, checked field by field (tools/serve_request.c, apart so
 * that tests/fuzz/fuzz_request.c can run it alone). */
#ifndef SNUG_TOOLS_SERVE_H
#define SNUG_TOOLS_SERVE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "snug.h"

enum { JOB_CHAT, JOB_COMPLETE };

#define SNUG_SERVE_MAX_PARALLEL 256 /* --parallel's bound (the library's SN_KVLOOP_MAX_SLOTS) */
enum { JOB_QUEUED, JOB_RUNNING, JOB_DONE };

typedef struct job {
    int kind;
    snug_message *msgs;
    int n_msgs;
    char *prompt;
    snug_sampling s;
    char **stop;
    bool stream, include_usage;
    int cache_prompt;    /* the request's "cache_prompt": 1, 0, or -1 (absent: the server's --cache-prompt) */
    double submitted, deadline, started;
    /* below: under mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int state;
    char *text; /* the answer so far */
    size_t len, cap;
    bool cancelled, timed_out, oom;
    int rc;              /* the generator's status once done */
    char err[512];
    snug_generation gen;
    int refs;            /* the connection and the queue/slot */
    int slot;
    struct job *next;
} job;

/* Why a request is refused: the HTTP status, OpenAI's error fields. */
typedef struct bad {
    int code;
    char msg[400];
    const char *param; /* the field at fault, or NULL */
    const char *type;
} bad;

/* Sets b (the message from fmt) and returns -1. */
int serve_fail(bad *b, int code, const char *param, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* The body of a chat (kind JOB_CHAT) or completion request into a new job
 * (refs 0, state JOB_QUEUED), or NULL with b set. */
job *serve_parse_job(const char *body, size_t n, int kind, bad *b);
void serve_job_free(job *j);

#endif
