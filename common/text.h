/* text.h: what a string from a client must be before culpritd keeps, logs or stores it:
 * valid UTF-8 (no overlong forms, surrogates or code points past U+10FFFF), no control
 * character (C0, DEL, C1 as U+0080..U+009F; a raw 0x9b byte is not UTF-8 either), and a
 * length in bytes within bounds. One rule for every field of every message (Hello, Batch
 * names, Relay, Goodbye, REST bodies, paths and parameters), so that nothing a client sends
 * can forge a log line, reach a terminal as an escape or be refused later by PostgreSQL. */
#ifndef CULPRIT_TEXT_H
#define CULPRIT_TEXT_H

#include <stddef.h>

/* NULL when s (len bytes; s may hold no NUL inside) is text of min..max bytes, else what is
 * wrong with it: "is empty", "is longer than allowed", "is not valid UTF-8", "holds a control
 * character". */
const char *text_check(const char *s, size_t len, size_t min, size_t max);
/* The same for a NUL-terminated string (NULL is the empty string). */
const char *text_check_str(const char *s, size_t min, size_t max);

#endif
