/* calib.h — the cost model's coefficients: efficiencies and overheads per operator class, read
 * from models/calib/<hw>.cfg (written by `unpad calibrate`) or defaulted from the hardware spec. */
#ifndef UNPAD_CALIB_H
#define UNPAD_CALIB_H

#include "model.h"
#include "ops.h"

typedef struct {
    char hw[CFG_STR_LEN];   /* hardware it was fitted on */
    double gemm_eff;        /* large-GEMM fraction of peak bf16 */
    double gemm_m_half;     /* rows M at which a GEMM reaches half of gemm_eff */
    double attn_eff;        /* FMHA forward: tile fraction of peak bf16 */
    double attn_cta_us;     /* FMHA forward: fixed cost per tile (CTA) */
    double attn_ctas_per_sm;/* FMHA forward: CTAs resident per multiprocessor */
    /* The backward's own three (another kernel: other occupancy, other per-tile costs); used when
     * attn_bwd_ctas_per_sm > 0, else the backward takes the forward's (older files, hand-made
     * coefficient sets). calib_fmha() picks. */
    double attn_bwd_eff, attn_bwd_cta_us, attn_bwd_ctas_per_sm;
    double bw_eff;          /* memory-bound kernels: fraction of memory bandwidth */
    double launch_us;       /* per kernel launch */
    double optim_bw_eff;    /* optimizer: fraction of memory bandwidth */
    double comm_eff;        /* collectives: fraction of the link bus bandwidth */
    double step_overhead_us;/* per step: host work, synchronisation */
    /* The host's time to enqueue one kernel of the forward (0: not modelled). Each step ends with
     * a synchronising read, so the next starts with an empty queue: where the first layers'
     * kernels are shorter than their enqueueing, the GPU waits for the host (step_host_wait_us). */
    double host_launch_us;
    /* The trainer's --graphs on (each micro-batch's pass launched as one CUDA graph): the GPU's gap
     * per kernel inside a graph and the step overhead, fitted on untraced steps of runs with graphs
     * (`calibrate --workloads` with such runs); 0: not fitted. calib_graphs applies them. */
    double graph_launch_us, graph_step_overhead_us;
    /* Narrow models: inverse efficiency added per unit of (CALIB_WIDTH_REF / hidden - 1), for GEMMs
     * and for memory-bound operators (0: none); and the small-M term scaled by
     * CALIB_WIDTH_REF / hidden (fewer output tiles per row in a narrower model). */
    double gemm_narrow, bw_narrow;
    /* The FMHA's (forward, backward): its tile inverse efficiency added per unit of
     * (CALIB_WIDTH_REF / (64 heads) - 1); calib_fmha_heads applies it. */
    double attn_narrow, attn_bwd_narrow;
    /* The FMHA's (forward, backward): its tile inverse efficiency added per unit of
     * ln(waves / CALIB_FMHA_WAVES_REF), waves = the launch's tiles / (SMs x tiles per SM), at least
     * 1; calib_fmha_tiles applies it. */
    double attn_load, attn_bwd_load;
    /* The largest launch (tiles) the load terms were fitted on: larger ones are held at its value
     * (0: no bound). */
    double attn_load_tiles_max;
    /* Per operator (index op_id), 0 where not fitted: the class value applies. A GEMM operator's
     * large-M fraction of bf16 peak (its shape N, K and epilogue set it; the small-M penalty
     * gemm_m_half / (gemm_eff M) is shared), a memory-bound operator's fraction of bandwidth. */
    double op_eff[OP_COUNT];
    char faster[256];       /* the what-if speed-ups applied (calib_faster), "" for none */
    double attn_bwd_pass_x; /* the FMHA backward's passes (cost_fmha_passes_us, at optim_bw_eff) this many
                             * times as fast by calib_faster (a faster optimizer leaves them as they
                             * were); 0 (not in the file) or 1: as the bandwidth gives */
    int transferred;        /* 1: carried from other hardware by `unpad calibrate --transfer`
                             * (an estimate: nothing was measured on this hardware) */
    int fitted;             /* 1 when read from a calibration file or fitted from traces */
    int fp8;                /* 1: the trainer's --fp8 on products: the encoder's four Linear forwards
                             * and their data gradients run at the FP8 peak (cost_tensor_us), weight
                             * gradients and everything else at bf16's; fitted on --fp8 on traces */
    int graphs;             /* calib_graphs: 0 not applied, CALIB_GRAPHS_FITTED or CALIB_GRAPHS_ESTIMATED */
} calib_coef;

#define CALIB_WIDTH_REF 1024.0 /* the hidden size the per-operator efficiencies are quoted at */

/* How much narrower than the reference a model of hidden size `width` is: CALIB_WIDTH_REF / width
 * - 1 (0 at the reference, and for width 0: an op_cost made without a model). */
static inline double calib_narrow(double width) { return width > 0 ? CALIB_WIDTH_REF / width - 1 : 0; }

/* One FMHA direction's coefficients (dir 0: forward, 1: backward). */
typedef struct {
    double eff, cta_us, ctas_per_sm;
} calib_fmha_coef;
calib_fmha_coef calib_fmha(const calib_coef *c, int dir);
/* c with the FMHA efficiencies of a model of `heads` heads of 64 (the width terms attn_narrow,
 * attn_bwd_narrow applied, then zeroed): c itself when they are 0, else *tmp. */
const calib_coef *calib_fmha_heads(const calib_coef *c, int heads, calib_coef *tmp);
#define CALIB_FMHA_WAVES_REF 10.0
/* ln(waves / CALIB_FMHA_WAVES_REF) of a launch of `tiles` tiles on `slots` slots (waves at least 1). */
double calib_fmha_load_x(double tiles, double slots);
/* c with the FMHA efficiencies of a launch of `tiles` tiles (heads x 64-row tiles) on `sms`
 * multiprocessors (the load terms applied, then zeroed): c itself when they are 0, else *tmp
 * (which may be c's own copy). */
const calib_coef *calib_fmha_tiles(const calib_coef *c, int sms, double tiles, calib_coef *tmp);

/* Where a calibration came from: the uncalibrated defaults, a fit, or a transfer. */
typedef enum { CALIB_DEFAULT, CALIB_FITTED, CALIB_TRANSFERRED } calib_source;

calib_source calib_source_of(const calib_coef *c);
const char *calib_source_name(calib_source s);   /* "default", "fitted", "transferred" */

/* What-if speed-ups: list is NAME=F[,NAME=F...], each making NAME F times as fast (F in [0.01, 100]:
 * above 1 faster, below 1 slower), where NAME is
 *   an operator (qkv_fwd, fmha_bwd, lamb, ...): its large-batch efficiency x F (a GEMM's small-M
 *     penalty and the width term are shared by every GEMM and stay; the FMHA's tile efficiency x F
 *     with its fixed per-tile cost, width and launch-size terms / F: the kernel F times as fast);
 *   a class (gemm, attention, normalization, elementwise, optimizer): every operator of it, and
 *     the class's shared terms (gemm: the small-M penalty and the width term);
 *   communication: a network F times as fast, the collectives' bandwidth within and across nodes
 *     x F (their latencies stay; comm_eff may pass 1: link_bw_gbs is a measured bus bandwidth, not
 *     a peak); the collectives are not named one by one;
 *   overhead: the step overhead and the host's enqueueing / F.
 * An efficiency pushed above 1 (faster than the hardware's peak) is refused with the largest factor
 * the item takes and the operator that sets it; a name given twice is refused.
 * c->faster records the list. */
int calib_faster(calib_coef *c, const char *list, unpad_err *err);

/* The coefficients of the trainer's --graphs on: the host enqueues a pass as one graph, captured while
 * the GPU runs the step before, so the GPU does not wait for it (host_launch_us 0); launch_us and
 * step_overhead_us become graph_launch_us and graph_step_overhead_us. A calibration without them
 * (graph_launch_us 0) keeps its launch_us and step overhead: an estimate (CALIB_GRAPHS_ESTIMATED),
 * the launches and the overhead as measured without graphs. c->graphs records which. */
enum { CALIB_GRAPHS_FITTED = 1, CALIB_GRAPHS_ESTIMATED = 2 };
void calib_graphs(calib_coef *c);
/* What calib_graphs did, for labels: "" (not applied), "on", or "on (an estimate: ...)". */
const char *calib_graphs_label(const calib_coef *c);

/* Uncalibrated defaults (typical values for a modern GPU; launch from the hardware spec). */
void calib_default(const hw_spec *hw, calib_coef *c);
int calib_load(const char *path, const hw_spec *hw, calib_coef *c, unpad_err *err);
int calib_write(const char *path, const calib_coef *c, const char *comment, unpad_err *err);

extern const cfg_field calib_schema[];
extern const size_t calib_schema_len;

#endif
