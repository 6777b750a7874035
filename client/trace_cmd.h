/* trace_cmd.h: `culprit trace` (a Perfetto or Chrome trace of chosen ranks from culpritd)
 * and `culprit capture` (start an on-demand raw kernel capture). Exit status: 0 done, 1 the
 * server or the network failed (its message printed), 2 bad usage. */
#ifndef CULPRIT_TRACE_CMD_H
#define CULPRIT_TRACE_CMD_H

int trace_cmd_main(int argc, char **argv);
int capture_cmd_main(int argc, char **argv);

#endif
