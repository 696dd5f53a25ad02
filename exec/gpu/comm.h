/* comm.h — data-parallel communication of the trainer: NCCL for gradients (all-reduce), the
 * batch's lengths (all-gather) and the balanced sample exchange (send/recv), one process per GPU.
 *
 * Start-up, one of:
 *   mpirun -np N bin/unpad-train ...   ranks from the MPI launcher's environment (OpenMPI, MPICH,
 *                                      Slurm's PMI); the NCCL id is broadcast with MPI when built
 *                                      with MPI, else through a file on the (single) host.
 *   bin/unpad-train --nproc N ...      the process forks N ranks and supervises them; the NCCL id
 *                                      goes through a unique-id file.
 *   bin/unpad-train --nproc 1 ...      one rank through the multi-process path (a real NCCL
 *                                      communicator of one rank: the path tested on one GPU).
 *   (neither)                          one rank, no NCCL communicator needed.
 * A rank that fails makes all ranks stop: under --nproc the supervisor kills the others and says
 * which rank failed and how; under mpirun the launcher does (a rank exits non-zero). */
#ifndef UNPAD_COMM_H
#define UNPAD_COMM_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime.h>
#ifdef UNPAD_HAVE_NCCL
#include <nccl.h>
#endif
#ifdef UNPAD_HAVE_MPI
#include <mpi.h>
#endif

#include "unpad.h"

#define ncclCheck(call)                                                                            \
    do {                                                                                           \
        ncclResult_t r_ = (call);                                                                  \
        if (r_ != ncclSuccess) {                                                                   \
            fprintf(stderr, "%s:%d: NCCL error %d: %s\n", __FILE__, __LINE__, (int)r_,             \
                    ncclGetErrorString(r_));                                                       \
            exit(EXIT_FAILURE);                                                                    \
        }                                                                                          \
    } while (0)

#ifdef UNPAD_HAVE_MPI
#define mpiCheck(call)                                                                             \
    do {                                                                                           \
        int m_ = (call);                                                                           \
        if (m_ != MPI_SUCCESS) {                                                                   \
            char s_[MPI_MAX_ERROR_STRING];                                                         \
            int l_ = 0;                                                                            \
            MPI_Error_string(m_, s_, &l_);                                                         \
            fprintf(stderr, "%s:%d: MPI error %d: %s\n", __FILE__, __LINE__, m_, s_);              \
            exit(EXIT_FAILURE);                                                                    \
        }                                                                                          \
    } while (0)
#endif

typedef enum { COMM_SINGLE, COMM_MPI, COMM_NPROC } comm_launcher;

typedef struct {
    int rank, size, local_rank;
    int device;
    comm_launcher launcher;
#ifdef UNPAD_HAVE_NCCL
    ncclComm_t nccl; /* NULL with one rank */
#endif
} comm_t;

/* Called first in main(): with --nproc N (nproc > 1) in the parent, forks N ranks, waits, stops all
 * if one fails (SIGINT / SIGTERM to the supervisor are passed on to every rank, which stop
 * cleanly), and returns the exit code for main (*is_parent = 1), 0 when every rank exited 0; a
 * failed rank's exit code (or 1 for a signal) otherwise, with which rank and how in err. In a
 * rank, or without --nproc, returns 0 with *is_parent = 0 and the program goes on. */
int comm_spawn(int nproc, int *is_parent, unpad_err *err);

/* Rank, size and device from the environment; selects the device; creates the NCCL communicator
 * when size > 1. EINVAL / EIO with the reason (no GPU, a bad environment, no NCCL id). */
int comm_init(comm_t *c, unpad_err *err);
/* The rank, size, local rank and launcher the environment gives (comm_init's first part: no GPU,
 * no MPI call); the values unchecked. */
void comm_env(comm_t *c);
void comm_free(comm_t *c);
/* 1 when collectives go through an NCCL communicator (several ranks, or one under a launcher). */
int comm_uses_nccl(const comm_t *c);

/* Collectives on `stream` (NCCL calls whenever a communicator exists, also of one rank). */
void comm_allreduce_sum_f32(comm_t *c, float *buf, size_t n, cudaStream_t stream);
void comm_allgather_i32(comm_t *c, const int32_t *send, int32_t *recv, size_t count_per_rank,
                        cudaStream_t stream);
/* Grouped point-to-point: sends send_words[d] int32 from send[d] to every rank d != rank and
 * receives recv_words[s] into recv[s] from every s != rank (buffers on the device; NULL/0 skip). */
void comm_exchange_i32(comm_t *c, int32_t *const *send, const int64_t *send_words,
                       int32_t *const *recv, const int64_t *recv_words, cudaStream_t stream);

#endif
