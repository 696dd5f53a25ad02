/* trainer.h — the training run as an object: set up from the arguments, stepped, evaluated,
 * checkpointed and reported. main_train.c parses the arguments and calls these; the files split by
 * concern:
 *   trainer.c        create / free, the step loop with its stops (signals, non-finite steps)
 *   train_setup.c    the inputs (through sim/resolve.h), data, model, balancer, outputs
 *   train_preflight.c  the host's checks before any rank or GPU (main calls it), the setup's shared parts
 *   train_step.c     one batch fetcher, one training step, the online calibration, evaluation
 *   train_report.c   progress lines, the metrics file, the summary lines and JSON
 *   train_ckpt.c     checkpoints and resume
 *   train_warm.c     the GEMM plans of the run, made after its first step
 * Errors follow the policy in kernels/common.h: input and environment errors come back to main as
 * an unpad_err; invariants and CUDA / cuBLAS / NCCL / MPI failures stop at once.
 *
 * Exit codes of unpad-train: 0 the run completed, or was stopped by SIGINT / SIGTERM (after the
 * current step, with a checkpoint when --save is given and the summary written); 1 an input or
 * environment error; 2 bad arguments; 3 a non-finite loss or gradient norm stopped the run. */
#ifndef UNPAD_TRAINER_H
#define UNPAD_TRAINER_H

#include <stdint.h>
#include <stdio.h>

#include <cuda_runtime.h>

#include "balance.h"
#include "calib.h"
#include "chrome_trace.h"
#include "dist.h"
#include "gpu/bert.h"
#include "gpu/ckpt.h"
#include "gpu/comm.h"
#include "gpu/dp.h"
#include "gpu/dump.h"
#include "gpu/graphs.h"
#include "gpu/gradsync.h"
#include "gpu/optrace.h"
#include "gpu/source.h"
#include "group.h"
#include "model.h"
#include "online.h"
#include "resolve.h"
#include "train_log.h"

#define TRAIN_EXIT_DIVERGED 3

#ifndef UNPAD_BUILD
#define UNPAD_BUILD "unknown" /* the Makefile defines it: git describe of the source */
#endif

/* The command line, parsed (main_train.c); strings point into argv. */
typedef struct {
    const char *model, *data, *dist, *eval, *save, *resume, *trace, *trace_json, *hw;
    const char *dump_w, *dump_g, *dump_final, *dump_batches, *policy, *count, *plan, *calib, *groups;
    const char *log_file, *summary_json;
    const char *precision; /* bf16 | fp32: the build the run needs */
    int nproc, streams, no_calib, online, online_window;
    double bucket_mb;
    int synthetic, batch, steps, warmup, vranks, log_every, eval_every, eval_batches, save_every, keep_last;
    int no_dropout, gelu_erf, trace_a, trace_b, skip_nonfinite, debug_nonfinite_step;
    int gemm_tune; /* --gemm-tune on (1) | off (0, the default) */
    int fp8;       /* --fp8 on (1) | off (0, the default): bert_options.fp8 */
    int graphs;     /* --graphs on (1) | off (0, the default): each micro-batch's pass as one CUDA graph */
    int last_heads; /* --last-layer heads (1, the default) | all (0): bert_options.last_heads */
    int act_tokens; /* --act-tokens: the activations' first size in tokens; 0: from the data */
    int grad_write; /* --grad-write on (1, the default): the first micro-batch writes the gradients |
                     * off (0): they are zeroed at the step's start and every micro-batch adds */
    double lr, wd, max_norm;
    double attn_dropout; /* --attn-dropout; < 0: the model config's */
    long seed;
} train_args;

/* The FMHA grouping the trainer runs: planned per micro-batch from its lengths. */
typedef struct {
    int nb;                 /* -1 auto, 0 one launch, else fixed boundaries */
    int bounds[GROUP_MAX];
    group_opts opts;        /* streams, granularity for auto */
    const hw_spec *hw;
    const calib_coef *cc;
    int heads;
} fmha_grouping;

/* What one step measured. */
typedef struct {
    int step;
    double loss, mlm, nsp;          /* normalised over the global batch */
    double mlm_correct, preds, seqs, tokens, flops; /* this process's correct predictions; the global
                                                       batch's predictions and sequences; tokens, flops */
    double lr, grad_norm;
    double step_s;                  /* wall time */
    double gpu_s;                   /* the step's span on the compute stream: its first command
                                       (the statistics reset) to the end of LAMB */
    double busy_s;                  /* traced steps: the summed operator times of rank 0 (else 0) */
    double host_s;                  /* host time to enqueue the commands the GPU span covers */
    double meas_max, meas_mean, pred_max, pred_mean; /* per-rank compute, measured and predicted (us) */
    int nonfinite;                  /* the loss or the gradient norm is not finite */
} step_result;

/* Sums over the steps since the last progress line. */
typedef struct {
    double t0, samples, tokens, flops, loss, mlm, nsp, acc_c, acc_p;
    double gpu_s, host_s;   /* the steps' spans on the GPU, the host's enqueueing */
    int steps, finite;      /* steps, and those with a finite loss (the loss means' count) */
} train_window;

typedef struct {
    const train_args *a;
    int argc;
    char **argv;
    comm_t comm;
    int rank0;
    /* inputs: as resolved (sim/resolve.h), and the parts the run uses */
    resolve_inputs in;
    model_cfg cfg;
    hw_spec hw;
    calib_coef cc;
    char calib_from[4096];
    char hw_from[4200]; /* the hardware spec's file and how it was chosen */
    batch_source *src, *evsrc;
    int K, B, R, seq_cap, max_len;
    int64_t step_samples;
    fmha_grouping fg;
    int balanced, weights_tokens;
    balance_policy policy;
    balance_count count;
    seq_cost scost;
    /* model and balancer */
    bert *b;
    bert_options opt;
    cudaStream_t s;
    char device[256];
    dp *dpp;
    step_model step;         /* the predicted per-rank load (sim/step.h, as unpad predict) */
    gradsync *gs;
    /* online calibration: every rank's lengths of the current and the prefetched global batch,
     * and every rank's measured compute time, gathered to every rank so all refit alike */
    online_cal *oc;
    int *olen, *ooff, *otime_dev;
    int32_t *otime;
    int online_refits, online_refused;
    online_fit ofit;
    char online_why[256];
    /* two sets of K micro-batches: the next step's are read while the GPU runs this one's; the
     * predicted cost per rank of each, like bufs */
    shard_batch *bufs;
    double *pred_buf;
    int cur, have_next;
    int *lens;
    double *meas_us, *rank_us;
    cudaEvent_t ev_ar, *evr;
    cudaEvent_t ev_step[2];  /* the step's first and last command on the compute stream */
    /* the run */
    ckpt_state st;
    int first_step;
    /* GEMM algorithms read on resume (CKPT_GEMM_FILE): -2 none asked for (a fresh run: it tunes),
     * -1 of another cuBLASLt (not used), 0 or more: the presets read (the run does not tune) */
    int gemm_presets;
    char last_ckpt[4200];
    FILE *tcsv;
    dump_file dumpb;             /* --dump-batches, open when dumpb.f */
    chrome_trace *tjson;
    optrace *tr;
    train_log *log;
    int64_t start_us;
    double t_start;
    double warm_s, first_step_s; /* the warm-up before the first step, and that step's wall time */
    int poison_grads;            /* UNPAD_POISON_GRADS=1 with --grad-write on: NaN before each step */
    double hold_us;              /* UNPAD_HOLD_STEP_US: the stream held this long before each step */
    train_window win;
    double tot_time, tot_samples, tot_tokens, tot_flops, all_samples, all_tokens, all_flops;
    double first_loss, last_loss, last_mlm, last_nsp, last_acc, eval_loss, eval_acc;
    double imb_meas_sum, imb_pred_sum;
    double tot_gpu_s, tot_busy_s, tot_traced_wall_s; /* steady state: GPU span; traced steps' busy and wall */
    double tot_host_s;                               /* steady state: host time enqueueing the span */
    int traced_steps;
    int imb_steps, steps_run, steady_steps, skipped;
    /* a stop asked for by a signal, agreed by every rank at the end of a step (an all-reduce of
     * the flag with the step's statistics, so all ranks stop after the same step) */
    float *stop_dev, *stop_host; /* (1) device, (1) pinned host */
    /* --graphs on: each micro-batch's forward and backward launched as one CUDA graph (graphs.h).
     * The next step's first micro-batch is uploaded and captured at the end of this step, before
     * its statistics are read, so the host never makes the GPU wait at a step's start; the next
     * step launches it if nothing was uploaded since. */
    step_graphs *graphs;
    struct {
        int step;            /* the step it was captured for; 0: none */
        long upload;         /* bert_uploads after its upload */
        cudaGraphExec_t x;
        bert_marks before, after;
    } prep;
    long graph_steps, prep_used, prep_dropped; /* steps run as graphs; prepared passes launched, dropped */
    int stop;                    /* the agreed stop: some rank got SIGINT / SIGTERM */
} trainer;

/* train_setup.c */
int trainer_create(trainer *t, const train_args *a, int argc, char **argv, unpad_err *err);
void trainer_free(trainer *t);
/* The resolver's request of a run (sim/resolve.h); device: the GPU's name, NULL where none is known. */
resolve_req train_resolve_req(const train_args *a, const char *device);
/* 1 when the run balances every global batch over the ranks; launcher: how the ranks were started. */
int train_balanced(const train_args *a, const resolve_inputs *in, comm_launcher launcher);
/* The flags that need the run's layout (c: its launcher and size): --calibrate-online refits the
 * balanced per-sequence cost (EINVAL when the run has none); --dump-batches needs one process. */
int train_check_layout(const train_args *a, const resolve_inputs *in, const comm_t *c, unpad_err *err);

/* train_preflight.c: what the host can check before any rank starts or the GPU is touched, with the
 * run's own functions: the inputs through the resolver (the default hardware spec standing in for
 * the GPU's), the --data / --eval shards against the model, the checkpoint --resume takes (its
 * header, seed, batch and ranks), the places of the outputs (nothing created or truncated), and
 * --calibrate-online and --dump-batches against the run's layout. UNPAD_OK, or an input error whose
 * message names the flag. trainer_create checks all of it again: the GPU's hardware spec and the
 * checkpoint's model (it needs the model built) are checked there only. */
int trainer_preflight(const train_args *a, unpad_err *err);

/* trainer.c: runs the steps; *outcome receives "completed", "stopped by signal" or "diverged"
 * (with the reason in err). Returns the exit code for main. */
int trainer_run(trainer *t, const char **outcome, unpad_err *err);

/* trainer.c: the signal that asked this process to stop (0: none). */
int trainer_signal(void);

/* train_step.c */
int trainer_fetch(trainer *t, int which, int64_t pos, unpad_err *err);
int trainer_step(trainer *t, int step, step_result *r, unpad_err *err);
/* --graphs on: the pass captured ahead for a step that will not run (the run stopped), if any,
 * discarded, and what its capture advanced on the host (pass and FP8 product counts) taken back. */
void trainer_prep_discard(trainer *t);
int trainer_evaluate(trainer *t, double *acc, double *loss, unpad_err *err);
/* One forward and backward of micro-batch 0 of the current batch with no hooks, then the gradients
 * and statistics cleared: loads the kernels a step launches (the warm-up's second half). */
int trainer_dry_pass(trainer *t, unpad_err *err);

/* train_warm.c: before the first step (its micro-batches fetched), the GEMM plans of every token
 * count the run may meet, (a fresh run with --gemm-tune on) the fastest algorithms of those around
 * the counts at hand, and one forward and backward of the first micro-batch that loads every
 * kernel; the run's state (weights, optimizer, data position) is left as it was */
int trainer_warm(trainer *t, unpad_err *err);

/* train_ckpt.c */
int trainer_resume(trainer *t, unpad_err *err);
int trainer_checkpoint(trainer *t, unpad_err *err);

/* train_report.c */
void trainer_print_setup(const trainer *t);
void trainer_report_step(trainer *t, const step_result *r, int force);
void trainer_report_eval(trainer *t, int step, double acc, double loss);
/* The summary lines (stdout) and the summary JSON; outcome and reason as trainer_run gave them. */
int trainer_report_summary(trainer *t, const char *outcome, const char *reason, unpad_err *err);

#endif
