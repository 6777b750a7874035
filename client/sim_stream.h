/* sim_stream.h: `culprit sim --scenario NAME [--seed N] [--iters N] --server HOST:PORT
 * [--per-rank] [--speed X] [--token T]` runs a scenario of client/sim.h and streams it to
 * culpritd as agents (client/fanout.h): one per node (1,620 for case5's 12,960 ranks) or one
 * per rank. Time is accelerated X times (default 100: case5's 30 s iterations take 0.3 s;
 * 0: as fast as the server takes it). Prints progress on stderr once a second; exits 0 when
 * culpritd acknowledged every record, 1 otherwise, 2 on bad usage. */
#ifndef CULPRIT_SIM_STREAM_H
#define CULPRIT_SIM_STREAM_H

/* The `sim --server` mode: argv[0] is "sim"; the caller hands over when --server is given. */
int sim_stream_main(int argc, char **argv);

#endif
