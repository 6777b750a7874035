/* notify.h: systemd's sd_notify protocol without libsystemd (Type=notify units): a state
 * ("READY=1", "STOPPING=1", "WATCHDOG=1", "STATUS=...") is one datagram to the AF_UNIX socket
 * named by $NOTIFY_SOCKET (a leading '@': the abstract namespace). Without $NOTIFY_SOCKET,
 * nothing is sent. */
#ifndef CULPRIT_NOTIFY_H
#define CULPRIT_NOTIFY_H

#include <stdint.h>

/* Sends state. 1 sent, 0 not under systemd (no $NOTIFY_SOCKET), -1 failed (errno). */
int notify_send(const char *state);
/* The watchdog interval systemd asks for (WatchdogSec=, in $WATCHDOG_USEC, for this process
 * when $WATCHDOG_PID is set); 0 when none. */
int64_t notify_watchdog_us(void);

#endif
