/* stats.h: small robust statistics on arrays of doubles (no allocation unless stated). */
#ifndef CULPRIT_STATS_H
#define CULPRIT_STATS_H

#include <stddef.h>

/* Consistency constant: MAD * 1.4826 estimates sigma for normal data. */
#define STATS_MAD_SCALE 1.482602218505602 /* 1 / Phi^-1(3/4) */

/* Median of x[0..n), reordering x in place (quickselect). NaN when n == 0. */
double stats_median_inplace(double *x, size_t n);
/* Median absolute deviation around med, reordering x in place (x is overwritten with
 * |x - med|). NaN when n == 0. */
double stats_mad_inplace(double *x, size_t n, double med);
/* Arithmetic mean and sample standard deviation (n - 1); NaN when undefined. */
double stats_mean(const double *x, size_t n);
double stats_sd(const double *x, size_t n);
/* Coefficient of variation sd / mean (sample sd); NaN when mean is 0 or n < 2. */
double stats_cv(const double *x, size_t n);
/* Robust z-score (v - med) / (STATS_MAD_SCALE * mad), with mad floored at floor; 0 when
 * both are 0. Inline: L2 takes three for each rank and phase. */
static inline double stats_robust_z(double v, double med, double mad, double floor)
{
	double s = mad > floor ? mad : floor;
	if (!(s > 0))
		return 0;
	return (v - med) / (STATS_MAD_SCALE * s);
}

/* Group summary filled by stats_group(): median, MAD, mean, sd, cv. scratch must hold n
 * doubles; x is not modified. */
struct stats_group {
	size_t n;
	double median, mad, mean, sd, cv;
};
void stats_group(const double *x, size_t n, double *scratch, struct stats_group *out);
/* Only n, median and MAD (mean, sd and cv NaN), as stats_group() gives them, in place: x is
 * reordered and overwritten. */
void stats_robust(double *x, size_t n, struct stats_group *out);

#endif
