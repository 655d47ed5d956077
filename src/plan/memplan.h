/* Offsets for blocks with lifetimes in one arena: best-fit into the gaps
 * between live blocks, in time order. */
#ifndef SN_PLAN_MEMPLAN_H
#define SN_PLAN_MEMPLAN_H

#include "core/core.h"

typedef struct sn_block {
    size_t size;
    int start, end;  /* alive from step start through step end, inclusive */
    size_t offset;   /* result */
} sn_block;

#define SN_ARENA_ALIGN 64

/* Places n blocks; returns the arena size via *total and the lower bound
 * (largest sum of sizes alive at one step) via *lower (may be NULL). */
int sn_memplan_place(sn_block *b, int n, size_t *total, size_t *lower, sn_err *err);

#endif
