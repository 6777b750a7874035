/* attrs.h: the compiler attributes culprit's C uses.
 *
 * MUST_CHECK marks a function whose result says whether it did what it was asked (0, or -1
 * with the reason set): a caller that drops the result is a compiler warning (an error in
 * CI). Put it before the declaration in the header. */
#ifndef CULPRIT_ATTRS_H
#define CULPRIT_ATTRS_H

#define MUST_CHECK __attribute__((warn_unused_result))
/* A MUST_CHECK result this caller does not need; the comment beside it says why. */
#define IGNORE_RESULT(call) ((void)!(call))

#endif
