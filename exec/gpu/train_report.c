/* train_report.c — what a run tells: its setup, a progress line every --log-every steps (and its
 * JSON line in --log-file), evaluations, and the summary lines and JSON at the end.
 * Lines scripts read keep their prefixes and fields: "step N/TOTAL | loss L (mlm M nsp S) | mlm acc
 * A | lr X | S samples/s | F TFLOP/s | T ms/step [| rank max/mean ...] | grad norm G | K tokens/s |
 * ETA E", "eval", "online", "summary:", "balance:", "attention:", "all-reduce:". */
#include <math.h>
#include <string.h>

#include <cuda_runtime.h>

#include "common.h"
#include "gpu/trainer.h"
#include "workload.h"

#define TRAIN_WARMUP_STEPS 1 /* the first step (plans, allocations) is left out of the steady state */

void trainer_print_setup(const trainer *t)
{
    const train_args *a = t->a;
    const model_cfg *c = &t->cfg;
    int K = t->K, B = t->B;
    printf("unpad-train: %s (%d layers, hidden %d, %lld parameters) on %s, %s\n", c->name, c->layers, c->hidden,
           (long long)model_param_count(c), t->device,
           strcmp(UNPAD_PRECISION, "fp32") ? (t->opt.fp8 ? "bf16 activations and weights, " WORKLOAD_LOG_FP8
                                                          : "bf16 activations and weights")
                                           : "fp32 throughout (the fp32 build)");
    printf("  data %s\n", source_describe(t->src));
    printf("  batch %d x %d virtual rank%s = %d sequences/step, %d steps, lr %.3g (warm-up %d, poly 1), "
           "wd %.3g, dropout %s (attention %g), GELU %s\n",
           B, K, K == 1 ? "" : "s", B * K, a->steps, a->lr, a->warmup, a->wd, a->no_dropout ? "off" : "on",
           a->no_dropout ? 0.0 : c->attn_dropout, a->gelu_erf ? "erf" : "tanh");
    printf("  device memory: %.2f GiB for parameters, optimizer and activations (%d tokens per micro-batch: %s; "
           "made again if a micro-batch holds more, up to %d)\n",
           bert_device_bytes(t->b) / 1073741824.0, t->opt.max_tokens,
           a->act_tokens ? "--act-tokens" : "B x mean + 5 sqrt(B) x sd of the data's lengths", t->opt.grow_tokens);
    if (t->balanced)
        printf("  %d rank%s x %d virtual = %d ranks; every step balanced with %s, %s counts, on %s "
               "(cost %.3g + %.3g len + %.3g len^2 us)%s\n",
               t->comm.size, t->comm.size == 1 ? "" : "s", K, t->R, balance_policy_name(t->policy),
               balance_count_name(t->count), t->weights_tokens ? "tokens" : "predicted cost", t->scost.c0,
               t->scost.c1, t->scost.c2, t->comm.launcher == COMM_SINGLE ? "" : ", NCCL all-reduce of the gradients");
    if (t->comm.launcher != COMM_SINGLE) {
        if (a->bucket_mb > 0)
            printf("  gradient all-reduce in buckets of >= %.0f MB on its own stream, overlapped with backward\n",
                   a->bucket_mb);
        else
            printf("  gradient all-reduce in one call after backward\n");
    }
    char gb[256];
    group_bounds_format(t->fg.bounds, t->fg.nb, gb, sizeof gb);
    printf("  hardware spec %s (%s)\n", t->hw.name, t->hw_from);
    printf("  FMHA groups: %s%s; cost model: %s\n", gb, t->fg.nb == 0 ? " (one launch per micro-batch)" : "",
           t->calib_from);
    if (t->fg.nb != 0)
        printf("  FMHA groups on up to %d stream%s\n", t->fg.opts.max_streams, t->fg.opts.max_streams == 1 ? "" : "s");
    if (t->opt.last_heads)
        printf(WORKLOAD_LOG_LAST_HEADS " (the masked positions, then each sequence's first token; "
               "--last-layer all: every token)\n");
    if (t->graphs)
        printf("  CUDA graphs: each micro-batch's forward and backward launched as one graph, captured while the "
               "step before computes (%s)\n",
               t->gs ? "not used: the all-reduce buckets start from inside the backward"
                     : t->tr ? "not the first step nor the traced ones" : "not the first step");
    fflush(stdout);
}

/* Adds a step to the totals and the window; the step's finite values only. */
static void account(trainer *t, const step_result *r)
{
    if (t->dpp && t->K > 1 && t->steps_run > 0) { /* step 1 warms up: left out */
        t->imb_meas_sum += r->meas_mean > 0 ? r->meas_max / r->meas_mean : 0;
        t->imb_pred_sum += r->pred_mean > 0 ? r->pred_max / r->pred_mean : 0;
        t->imb_steps++;
    }
    t->steps_run++;
    t->all_samples += r->seqs;
    t->all_tokens += r->tokens;
    t->all_flops += r->flops;
    if (t->steps_run > TRAIN_WARMUP_STEPS) {
        t->tot_time += r->step_s;
        t->tot_samples += r->seqs;
        t->tot_tokens += r->tokens;
        t->tot_flops += r->flops;
        t->tot_gpu_s += r->gpu_s;
        t->tot_host_s += r->host_s;
        t->steady_steps++;
        if (r->busy_s > 0) {
            t->tot_busy_s += r->busy_s;
            t->tot_traced_wall_s += r->gpu_s;
            t->traced_steps++;
        }
    }
    train_window *w = &t->win;
    w->steps++;
    w->samples += r->seqs;
    w->tokens += r->tokens;
    w->flops += r->flops;
    w->gpu_s += r->gpu_s;
    w->host_s += r->host_s;
    if (r->nonfinite)
        return;
    if (t->first_loss < 0)
        t->first_loss = r->loss;
    t->last_loss = r->loss;
    t->last_mlm = r->mlm;
    t->last_nsp = r->nsp;
    t->last_acc = r->preds ? r->mlm_correct / r->preds : 0;
    w->finite++;
    w->loss += r->loss;
    w->mlm += r->mlm;
    w->nsp += r->nsp;
    w->acc_c += r->mlm_correct;
    w->acc_p += r->preds;
}

static void print_online(const trainer *t, int step)
{
    const online_fit *f = &t->ofit;
    if (t->oc && t->online_refits)
        printf("online %6d | cost %.4g + %.4g len + %.4g len^2 us (+ %.4g us per rank) | fit rms %.2f%% "
               "max %.2f%% over %d ranks x %d steps%s%s\n",
               step, f->cost.c0, f->cost.c1, f->cost.c2, f->fixed_us, f->rms_pct, f->max_abs_pct,
               f->obs / (f->steps ? f->steps : 1), f->steps, f->notes[0] ? "; " : "", f->notes);
    else if (t->oc && t->online_refused)
        printf("online %6d | no refit yet: %s\n", step, t->online_why);
}

void trainer_report_step(trainer *t, const step_result *r, int force)
{
    account(t, r);
    const train_args *a = t->a;
    if (!force && r->step % a->log_every != 0 && r->step != a->steps)
        return;
    train_window *w = &t->win;
    double dt = unpad_now_s() - w->t0, n = w->steps ? w->steps : 1, good = w->finite;
    train_step_metrics m = {
        .step = r->step, .steps = a->steps, .time_s = unpad_now_s() - t->t_start,
        .loss = good > 0 ? w->loss / good : r->loss, .mlm_loss = good > 0 ? w->mlm / good : r->mlm,
        .nsp_loss = good > 0 ? w->nsp / good : r->nsp, .mlm_acc = w->acc_p ? w->acc_c / w->acc_p : 0,
        .lr = r->lr, .grad_norm = r->grad_norm, .samples_per_s = w->samples / dt, .tokens_per_s = w->tokens / dt,
        .tflops = w->flops / dt * 1e-12, .ms_per_step = 1e3 * dt / n,
        .gpu_ms = 1e3 * w->gpu_s / n, .host_ms = 1e3 * w->host_s / n,
        .eta_s = train_eta_s(t->tot_time, t->steady_steps, a->steps - r->step), .skipped = t->skipped};
    char eta[32];
    train_format_eta(m.eta_s, eta, sizeof eta);
    printf("step %6d/%d | loss %.4f (mlm %.4f nsp %.4f) | mlm acc %.4f | lr %.3e | %8.1f samples/s | "
           "%6.1f TFLOP/s | %.2f ms/step",
           m.step, m.steps, m.loss, m.mlm_loss, m.nsp_loss, m.mlm_acc, m.lr, m.samples_per_s, m.tflops, m.ms_per_step);
    int tracing = t->tr && r->step >= a->trace_a && r->step <= a->trace_b;
    if (t->dpp && t->K > 1) {
        printf(" | rank max/mean %.3f (predicted %.3f)", r->meas_mean > 0 ? r->meas_max / r->meas_mean : 0,
               r->pred_mean > 0 ? r->pred_max / r->pred_mean : 0);
    } else if (tracing && t->K > 1) {
        double mx = 0, mean = 0;
        for (int v = 0; v < t->K; v++) {
            mean += t->rank_us[v] / t->K;
            mx = t->rank_us[v] > mx ? t->rank_us[v] : mx;
        }
        printf(" | rank max/mean %.3f", mean > 0 ? mx / mean : 0);
    }
    printf(" | grad norm %.4g | %.0f tokens/s | ETA %s\n", m.grad_norm, m.tokens_per_s, eta);
    print_online(t, r->step);
    fflush(stdout);
    train_log_step(t->log, &m);
    memset(w, 0, sizeof *w);
    w->t0 = unpad_now_s();
}

void trainer_report_eval(trainer *t, int step, double acc, double loss)
{
    t->eval_acc = acc;
    t->eval_loss = loss;
    printf("eval  %6d | mlm loss %.4f | mlm acc %.4f\n", step, loss, acc);
    fflush(stdout);
    train_log_eval(t->log, step, unpad_now_s() - t->t_start, loss, acc);
}

static void print_summary_lines(const trainer *t, double wall, double mem_gib)
{
    printf("summary: %d steps in %.1f s | loss %.4f -> %.4f | mlm acc %.4f | %.1f samples/s | %.1f model "
           "TFLOP/s | device memory in use %.2f GiB | whole run %.1f samples/s (steady state: steps after the "
           "first %d)\n",
           t->steps_run, wall, t->first_loss, t->last_loss, t->last_acc,
           t->tot_time > 0 ? t->tot_samples / t->tot_time : 0, t->tot_time > 0 ? t->tot_flops / t->tot_time * 1e-12 : 0,
           mem_gib, wall > 0 ? t->all_samples / wall : 0, TRAIN_WARMUP_STEPS);
    if (t->steady_steps) {
        double n = t->steady_steps, wall_ms = 1e3 * t->tot_time / n, gpu_ms = 1e3 * t->tot_gpu_s / n;
        printf("idle: a steady step takes %.2f ms of wall time, its commands span %.2f ms of the GPU: %.2f ms "
               "(%.1f%%) idle between steps", wall_ms, gpu_ms, wall_ms - gpu_ms,
               wall_ms > 0 ? 100 * (wall_ms - gpu_ms) / wall_ms : 0);
        if (t->traced_steps)
            printf("; inside the %d traced steps the operators take %.2f of %.2f ms (%.2f ms idle)", t->traced_steps,
                   1e3 * t->tot_busy_s / t->traced_steps, 1e3 * t->tot_traced_wall_s / t->traced_steps,
                   1e3 * (t->tot_traced_wall_s - t->tot_busy_s) / t->traced_steps);
        printf("\nhost: enqueueing a steady step's commands takes %.2f ms of the host (%.0f%% of the step's GPU "
               "span)%s\n", 1e3 * t->tot_host_s / n, gpu_ms > 0 ? 100 * t->tot_host_s / t->tot_gpu_s : 0,
               t->hold_us > 0 ? "; UNPAD_HOLD_STEP_US: the GPU waited before each step until the host was ahead "
                                "(the span leaves the wait out, the wall time does not)" : "");
    }
    if (t->steps_run)
        printf("start-up: %.2f s of warm-up before step %d (in the whole run, not in the steady state); step %d "
               "took %.2f ms of wall time%s%.2f%s\n", t->warm_s, t->first_step, t->first_step, 1e3 * t->first_step_s,
               t->steady_steps ? ", a steady step " : "", t->steady_steps ? 1e3 * t->tot_time / t->steady_steps : 0,
               t->steady_steps ? " ms on average" : "");
    if (t->imb_steps)
        printf("balance: %s, %s counts, %d ranks: measured rank max/mean %.4f, predicted %.4f (mean over %d "
               "steps)\n", balance_policy_name(t->policy), balance_count_name(t->count), t->R,
               t->imb_meas_sum / t->imb_steps, t->imb_pred_sum / t->imb_steps, t->imb_steps);
    if (t->tr) {
        double fw = optrace_op_mean_us(t->tr, OP_FMHA_FWD), bw = optrace_op_mean_us(t->tr, OP_FMHA_BWD);
        printf("attention: fmha_fwd %.3f ms + fmha_bwd %.3f ms = %.3f ms per traced step (all ranks and "
               "layers; grouped launches count their overlap once)\n", fw * 1e-3, bw * 1e-3, (fw + bw) * 1e-3);
        if (t->comm.launcher != COMM_SINGLE)
            printf("all-reduce: %.3f ms per traced step on the communication stream%s\n",
                   optrace_op_mean_us(t->tr, OP_ALLREDUCE) * 1e-3, t->gs ? " (overlapped with backward)" : "");
    }
    if (t->oc)
        printf("online calibration: %d refits, %d refused%s%s\n", t->online_refits, t->online_refused,
               t->online_refused ? "; last refusal: " : "", t->online_refused ? t->online_why : "");
    if (t->skipped)
        printf("non-finite steps skipped: %d\n", t->skipped);
    long act;
    int grown;
    bert_activations(t->b, &act, &grown);
    printf("activations: %ld tokens per micro-batch at the end, %d at the start (%d time%s made again for a "
           "larger micro-batch)\n", act, t->opt.max_tokens, grown, grown == 1 ? "" : "s");
    int plans, fallbacks, late, evicted;
    bert_gemm_counts(t->b, &plans, &fallbacks, &late, &evicted);
    printf("gemm: %d cuBLASLt plans cached (%d evicted), %d products with an uncached exact-shape plan, %d "
           "shapes the warm-up missed (plans made or refusals met by later steps; UNPAD_GEMM_LOG=1 names "
           "them)\n", plans, evicted, fallbacks, late);
    long f8, f8c;
    bert_fp8_counts(t->b, &f8, &f8c);
    if (t->opt.fp8)
        printf("fp8: %ld Linear products in FP8, %ld in bf16 while the first forward and backward gathered the "
               "maxima the scales start from\n", f8, f8c);
    if (t->graphs) {
        step_graphs_stats g;
        step_graphs_stats_get(t->graphs, &g);
        printf("graphs: %ld of %d steps launched their passes as CUDA graphs (%ld nodes a pass); %ld passes captured: "
               "%ld updated a kept graph, %ld instantiated one (%ld updates refused); %ld captured a step ahead and "
               "launched, %ld dropped (an evaluation uploaded between the steps); %.2f ms of the host a capture\n",
               t->graph_steps, t->steps_run, g.nodes, g.captures, g.updates, g.instantiations, g.update_refused,
               t->prep_used, t->prep_dropped, g.captures ? 1e3 * g.host_s / g.captures : 0.0);
    }
}

int trainer_report_summary(trainer *t, const char *outcome, const char *reason, unpad_err *err)
{
    if (!t->rank0)
        return UNPAD_OK;
    double wall = t->t_start > 0 ? unpad_now_s() - t->t_start : 0, mem_gib = 0;
    size_t fr = 0, tot = 0;
    if (t->b && cudaMemGetInfo(&fr, &tot) == cudaSuccess)
        mem_gib = (tot - fr) / 1073741824.0;
    if (t->b)
        print_summary_lines(t, wall, mem_gib);
    fflush(stdout);
    char path[4200];
    train_summary_path(t->a->summary_json, t->a->log_file, path, sizeof path);
    if (!path[0])
        return UNPAD_OK;
    train_summary s = {
        .outcome = outcome, .reason = reason, .first_step = t->first_step, .last_step = (int)t->st.step,
        .steps_total = t->a->steps, .steps_run = t->steps_run, .skipped = t->skipped, .time_s = wall,
        .samples_per_s = wall > 0 ? t->all_samples / wall : 0, .tokens_per_s = wall > 0 ? t->all_tokens / wall : 0,
        .tflops = wall > 0 ? t->all_flops / wall * 1e-12 : 0,
        .steady_samples_per_s = t->tot_time > 0 ? t->tot_samples / t->tot_time : NAN,
        .steady_tokens_per_s = t->tot_time > 0 ? t->tot_tokens / t->tot_time : NAN,
        .steady_tflops = t->tot_time > 0 ? t->tot_flops / t->tot_time * 1e-12 : NAN,
        .warmup_steps = TRAIN_WARMUP_STEPS, .warmup_s = t->warm_s, .first_step_s = t->steps_run ? t->first_step_s : NAN,
        .memory_gib = mem_gib,
        .first_loss = t->first_loss >= 0 ? t->first_loss : NAN, .final_loss = t->steps_run ? t->last_loss : NAN,
        .final_mlm_loss = t->steps_run ? t->last_mlm : NAN, .final_nsp_loss = t->steps_run ? t->last_nsp : NAN,
        .final_mlm_acc = t->steps_run ? t->last_acc : NAN, .eval_mlm_loss = t->eval_loss,
        .eval_mlm_acc = t->eval_acc, .checkpoint = t->last_ckpt, .model = t->cfg.name, .device = t->device,
        .precision = UNPAD_PRECISION, .build = UNPAD_BUILD, .argc = t->argc, .argv = t->argv};
    return train_summary_write(path, &s, err);
}
