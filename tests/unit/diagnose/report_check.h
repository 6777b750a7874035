/* report_check.h: what every diagnosis report must be, whatever the input (the property
 * test and fuzz_diagnose): JSON that jansson parses back, with no NaN or infinity in it
 * (the summary included), a text form, a known category, culprit ranks inside the job. */
#ifndef CULPRIT_REPORT_CHECK_H
#define CULPRIT_REPORT_CHECK_H

#include <stdint.h>

#include "report.h"

/* NULL when r is sound, else what is wrong with it. */
const char *report_check(const struct report *r, uint32_t world);

#endif
