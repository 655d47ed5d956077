/* Shared by the CLI's command files (tools/snug_*.c). */
#ifndef SNUG_TOOLS_CLI_H
#define SNUG_TOOLS_CLI_H

#include <stdbool.h>
#include <stddef.h>

/* Prints "snug CMD: MSG (see 'snug CMD --help')" and exits with status 2. */
void cli_die_usage(const char *cmd, const char *msg);
/* Prints "snug CMD: PATH: MSG" for an error about the model at PATH; the
 * path once only, since the loader's messages start with it already. */
void cli_model_error(const char *cmd, const char *path, const char *msg);
/* The integer v of option opt, from lo to hi; otherwise prints why (as
 * cli_die_usage) and exits with status 2. */
long cli_parse_long(const char *cmd, const char *opt, const char *v, long lo, long hi);
/* "1.23 MiB"-style sizes. */
void cli_human_bytes(double bytes, char *buf, size_t cap);
/* --mem DEVICE=SIZE: the budget in bytes for the host (the only device of
 * this build that takes one: host, or cpu as ONNX Runtime names it); a bad
 * value prints why and exits with status 2. */
/* --mem DEVICE=SIZE: the bytes, *device true for the accelerator (gpu,
 * opencl, accelerator, cuda), false for the host; exits on a bad value. */
unsigned long long cli_mem_budget(const char *cmd, const char *val, bool *device);

/* The placement options as config entries (key, value pairs in kv): the
 * device (snug.device), -ngl, --mem gpu=SIZE, --rules. */
typedef struct cli_placement {
    const char *kv[16];
    int n;              /* pairs */
    char mem[32];       /* --mem gpu='s bytes as text */
    const char *device; /* --device, or NULL */
} cli_placement;
/* Whether option a (value v) is one of them, taken into p (an error exits). */
bool cli_placement_arg(const char *cmd, const char *a, const char *v, cli_placement *p);

/* The tools' logger for snug_options_set_logger: warnings to stderr after
 * "snug CMD:" (user: the command's name, a string). */
void cli_log(void *user, int level, const char *msg);

/* The placement options of run, bench, generate, plan and serve (docs/placement.md). */
#define CLI_PLACEMENT_HELP                                                              \
    "  --device DEV        an accelerator beside the host: opencl, opencl:N,\n"         \
    "                      opencl:NAME (config snug.device); what it has no kernel\n"   \
    "                      for stays on the host\n"                                     \
    "  -ngl N|all|auto     layers on it, as llama.cpp counts: the last N repeating\n"   \
    "                      layers, the output layer as the N+1-th, the input layers\n"  \
    "                      on the host (default auto: as many as fit --mem gpu=, or\n"  \
    "                      its free memory less a margin; snug.n_gpu_layers)\n"         \
    "  --mem gpu=SIZE      the accelerator's budget (snug.mem.gpu): the plan holds\n"   \
    "                      at most this there, KV cache and activations included\n"     \
    "  --overflow MODE     past the budget: stop (default: the layers placed are\n"    \
    "                      contiguous), skip (try each next layer), stream (every\n"  \
    "                      layer there, the weights that do not fit copied in\n"      \
    "                      from host memory layer by layer; snug.placement_overflow)\n" \
    "  --rules TEXT        placement by node name, ONNX Runtime's\n"                    \
    "                      session.name_based_layer_assignment, e.g.\n"                 \
    "                      'gpu(layers.1/); cpu(lm_head)'; a pattern matching no\n"     \
    "                      node is a warning (an error with\n"                          \
    "                      --config snug.strict_layer_assignment=1)\n"

#endif
