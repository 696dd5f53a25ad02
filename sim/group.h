/* group.h — FMHA grouping: split one GPU's sequences by length into groups, each launched as its
 * own FMHA kernel (forward and backward), spread over CUDA streams, so that the groups' tail waves
 * overlap instead of idling multiprocessors.
 *
 * Model (per encoder layer, forward + backward; `unpad plan` and the trainer use the same):
 *   t_g   = cost_fmha_us(group g, fwd) + cost_fmha_us(group g, bwd) + 2 x launch_us: the group alone
 *           on the GPU (tile simulation: wave quantization and its own tail), launched longest first;
 *   W     = sum over every tile of its time / (sms x ctas_per_sm) + 2 x launch_us: the work if the
 *           multiprocessors were never idle (it does not depend on the grouping);
 *   streams take contiguous ranges of groups (short sequences on one stream, long on another);
 *   a stream's chain is the sum of its groups' t_g (its kernels run one after another);
 *   objective = max(W, longest chain): what the DP below minimises (streams share the
 *           multiprocessors, so the work bound holds, and no stream ends before its own kernels
 *           would alone; it lets concurrent kernels overlap perfectly);
 *   total = the groups' tiles simulated sharing the slots (cost_fmha_streams_us: launch order,
 *           a stream's groups one after another) plus the longest chain's launches: what the
 *           options are compared by, and what group_plan_auto chooses with.
 * One stream gives total = sum of t_g (every tail exposed); one launch of the whole batch is t of
 * the batch in loader order. Forward and backward are timed as one chain per group (their times
 * are near proportional, so max(Wf, cf) + max(Wb, cb) ~ max(Wf + Wb, cf + cb)).
 *
 * The planner is a dynamic programme over the lengths sorted longest first: candidate cuts lie
 * between different lengths (and, with a granularity g, only where the lengths fall in different
 * g-wide bins); g1(a, b) = best one-stream grouping of units a..b (O(m^3)), then
 * f_s(b) = min over a of max(f_{s-1}(a), g1(a, b)) over s = 1..max_streams streams. Ties go to
 * fewer streams, then fewer groups. */
#ifndef UNPAD_GROUP_H
#define UNPAD_GROUP_H

#include "calib.h"
#include "model.h"
#include "unpad.h"

#define GROUP_MAX 64
#define GROUP_MAX_STREAMS 8

typedef struct {
    int ngroups;
    int streams;                   /* streams the plan uses (1..max_streams) */
    int lo[GROUP_MAX], hi[GROUP_MAX]; /* group g holds lengths lo..hi (longest group first) */
    int count[GROUP_MAX];          /* sequences in the group */
    int stream[GROUP_MAX];         /* its stream */
    double us[GROUP_MAX];          /* t_g: alone, forward + backward + two launches, per layer */
    double start_us[GROUP_MAX], end_us[GROUP_MAX]; /* timeline: chains stretched to end at total */
    double work_us;                /* W */
    double chain_us;               /* longest stream chain */
    double objective_us;           /* per layer: max(work_us, chain_us), what the DP minimises */
    double total_us;               /* per layer: the groups' kernels simulated sharing the device
                                    * (cost_fmha_streams_us, fwd + bwd, plus the longest chain's
                                    * launches): the time the options are compared by */
} group_plan;

typedef struct {
    int max_streams;   /* 1..GROUP_MAX_STREAMS */
    int granularity;   /* >= 1: cut only between lengths in different granularity-wide bins */
    int max_units;     /* the granularity doubles until at most this many units (<= GROUP_MAX) */
} group_opts;

void group_opts_default(group_opts *o);   /* 4 streams, granularity 1, 48 units */

/* The grouping of len[0..n) (any order) of least objective_us by the dynamic programme. */
int group_plan_dp(const hw_spec *hw, const calib_coef *c, int heads, const int *len, int n,
                  const group_opts *o, group_plan *out, unpad_err *err);

/* What the trainer and the tools run for --fmha-groups auto: of the DP's best plan for each
 * stream count 1..max_streams and one launch of the whole batch, the one of least simulated
 * total_us (ties: fewer groups). The DP's objective lets kernels on different streams overlap
 * perfectly; the simulation charges their sharing of the slots, which on the H200 makes most
 * groupings of a 56-sequence batch no better than one launch. */
int group_plan_auto(const hw_spec *hw, const calib_coef *c, int heads, const int *len, int n,
                    const group_opts *o, group_plan *out, unpad_err *err);

/* The same optimum by enumerating every cut set and stream split (for tests: units <= 14). */
int group_plan_brute(const hw_spec *hw, const calib_coef *c, int heads, const int *len, int n,
                     const group_opts *o, group_plan *out, unpad_err *err);

/* Fixed boundaries: bounds[0..nb) ascending upper lengths; group j holds lengths in
 * (bounds[j-1], bounds[j]], and lengths above the last bound form a last group. Empty groups are
 * dropped; the groups are split over up to max_streams streams as well as they can be. */
int group_plan_bounds(const hw_spec *hw, const calib_coef *c, int heads, const int *len, int n,
                      const int *bounds, int nb, int max_streams, group_plan *out, unpad_err *err);

/* One FMHA launch forward and one backward over len[0..n) in the given order, per layer. */
double group_one_launch_us(const hw_spec *hw, const calib_coef *c, int heads, const int *len, int n);

/* The upper bounds of a plan's groups except the longest (ascending), for a plan file:
 * returns their count (ngroups - 1). */
int group_plan_upper_bounds(const group_plan *p, int *bounds);

/* A plan's groups as contiguous sequence ranges of a batch whose lengths len[0..n) are longest
 * first (the trainer's micro-batches): group g launches sequences [seq_begin[g], seq_end[g]), whose
 * longest is max_len[g]. EINVAL if the lengths are not longest first or do not fit the plan. */
int group_seq_ranges(const group_plan *p, const int *len, int n, int *seq_begin, int *seq_end,
                     int *max_len, unpad_err *err);

/* Parses "auto", "none" (one launch) or a comma list of ascending lengths ("128,256,384").
 * Returns 0 and *nb = -1 for auto, 0 for none, else the count; nonzero with err on a bad list. */
int group_bounds_parse(const char *s, int *bounds, int *nb, unpad_err *err);
/* Writes "auto", "none" or the list into buf. */
void group_bounds_format(const int *bounds, int nb, char *buf, size_t n);

#endif
