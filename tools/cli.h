/* Shared by the CLI's command files (tools/snug_*.c). */
#ifndef SNUG_TOOLS_CLI_H
#define SNUG_TOOLS_CLI_H

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
unsigned long long cli_mem_budget(const char *cmd, const char *val);

#endif
