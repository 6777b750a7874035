/* replay.h: `culprit replay --server HOST:PORT [--per-rank] [--token T] [--timeout S] [--quiet] PATH...`
 * streams interchange JSONL files (plain or gzipped; docs/format.md) to
 * culpritd as agents: one per node (host) by default, one per rank with --per-rank. Waits
 * until culpritd acknowledged every record; exit 0 then, 1 when something was not
 * acknowledged (server unreachable, batches rejected), 2 on bad usage or bad input. */
#ifndef CULPRIT_REPLAY_H
#define CULPRIT_REPLAY_H

/* The subcommand: argv[0] is "replay". */
int replay_main(int argc, char **argv);

#endif
