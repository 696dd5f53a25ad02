/* train_ckpt.c — a run's checkpoints and resume (trainer.h; the folders: exec/ckpt_dir.h). */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "gpu/trainer.h"

/* The GEMM algorithms saved beside the checkpoint file `path` (with --gemm-tune on): the
 * interrupted run's tuned choices, so that the resumed run computes as it would have (and tunes
 * nothing itself). */
static int resume_gemm_algos(trainer *t, const char *path, unpad_err *err)
{
    char algos[4300];
    const char *slash = strrchr(path, '/');
    int dir = slash ? (int)(slash - path) : 1;
    snprintf(algos, sizeof algos, "%.*s/%s", dir, slash ? path : ".", CKPT_GEMM_FILE);
    t->gemm_presets = 0;
    if (access(algos, F_OK)) {
        printf("  resume: no %s beside the checkpoint: the GEMMs run cuBLASLt's first choices, untuned\n",
               CKPT_GEMM_FILE);
        return UNPAD_OK;
    }
    int rc = gemm_ctx_presets_read(bert_gemm(t->b), algos, &t->gemm_presets, err);
    if (rc == UNPAD_OK && t->gemm_presets < 0)
        printf("  resume: %s is of another cuBLASLt version: the GEMMs run cuBLASLt's first choices, untuned\n",
               algos);
    return rc;
}

/* Takes the latest complete checkpoint under --resume that is of this model, seed, batch and rank
 * count; one that differs is refused, naming what differs. */
int trainer_resume(trainer *t, unpad_err *err)
{
    ckpt_model want;
    ckpt_model_of(t->b, &want);
    char path[4200], notes[2048];
    int rc = ckpt_dir_latest(t->a->resume, &want, &t->st, path, sizeof path, notes, sizeof notes, err);
    if (rc) /* the message lists every checkpoint skipped and why */
        return rc;
    if (notes[0])
        printf("  resume: %s", notes); /* each newer checkpoint skipped and why, one per line */
    ckpt_state got;
    if ((rc = ckpt_file_check(path, &want, NULL, &got, err)))
        return rc;
    if ((rc = ckpt_load(path, t->b, &got, err)))
        return rc;
    if (t->a->gemm_tune && (rc = resume_gemm_algos(t, path, err)))
        return rc;
    t->st = got;
    snprintf(t->last_ckpt, sizeof t->last_ckpt, "%s", path);
    printf("  resumed from %s at step %lld (data position %lld)\n", path, (long long)t->st.step,
           (long long)t->st.data_pos);
    train_log_resume(t->log, (long long)t->st.step, path);
    return UNPAD_OK;
}

int trainer_checkpoint(trainer *t, unpad_err *err)
{
    if (!t->rank0 || !t->a->save)
        return UNPAD_OK;
    char saved[4200];
    int rc = ckpt_save(t->a->save, t->b, &t->st, t->a->keep_last, saved, sizeof saved, err);
    if (rc)
        return rc;
    snprintf(t->last_ckpt, sizeof t->last_ckpt, "%s", saved);
    printf("  checkpoint %s at step %lld\n", saved, (long long)t->st.step);
    fflush(stdout);
    return UNPAD_OK;
}
