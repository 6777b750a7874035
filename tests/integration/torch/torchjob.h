/* torchjob.h: train.py as a real PyTorch job (python3 -m torch.distributed.run, gloo, CPU)
 * with culprit_agent.torch.Monitor streaming into the culpritd under test, for the tests of
 * this directory. TORCH_PYTHON is "" when no python3 here imports torch: the tests skip. */
#ifndef CULPRIT_TORCHJOB_H
#define CULPRIT_TORCHJOB_H

#include <sys/types.h>

#include "harness.h"

/* Starts nproc ranks of train.py --server (p's agent port) --job job, then the extra
 * arguments (NULL-terminated); the logs of the ranks under the test's scratch directory. */
pid_t torchjob_start(const struct h_proc *p, const char *job, int nproc, const char *const *extra);
/* Waits for the job: 0 when every rank exited 0 (train.py: all its records acknowledged). */
int torchjob_wait(pid_t pid);

#endif
