/* stats.c: quickselect median, MAD, mean, sd, CV (the robust z is inline in stats.h). */
#include "stats.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

/* Under this many elements selection ends in an insertion sort. */
#define STATS_SORT_SMALL 16
/* From this many elements a quickselect pivot comes from a sample (sample_pivot) */
#define STATS_SAMPLE_FROM 1024

static void swap_d(double *a, double *b)
{
	double t = *a;
	*a = *b;
	*b = t;
}

/* Moves the elements of a[0..n) below p to the front; returns how many there are. The
 * move is arithmetic on the comparison, not a branch: compared with their own median, the
 * comparisons are coin flips a branch predictor loses half of (a branching partition is the
 * largest cost of a diagnosis at 100,000 ranks). Invariant: a[0..j) < p <= a[j..i). */
static size_t partition_below(double *a, size_t n, double p)
{
	size_t j = 0;
	for (size_t i = 0; i < n; i++) {
		double x = a[i];
		a[i] = a[j];
		a[j] = x;
		j += x < p;
	}
	return j;
}

/* Moves the elements of a[0..n) equal to p (none below it) to the front; returns how many. */
static size_t partition_equal(double *a, size_t n, double p)
{
	size_t j = 0;
	for (size_t i = 0; i < n; i++) {
		double x = a[i];
		a[i] = a[j];
		a[j] = x;
		j += x <= p;
	}
	return j;
}

static double select_k(double *a, size_t n, size_t k);

/* Puts at a[l] a pivot for selecting the k-th of a[l..r) (r - l > STATS_SAMPLE_FROM): a
 * sample of about (r - l)^(2/3) / 2 elements spread over the range is gathered at its front
 * and the pivot selected from it just past k's share of the sample, toward the range's
 * nearer end by about two standard deviations of that share, so that k falls on the short
 * side of the partition: the range shrinks to a few percent of itself in two partitions
 * where a median of three takes about four (the idea of Floyd and Rivest's SELECT, 1975). */
static void sample_pivot(double *a, size_t l, size_t r, size_t k)
{
	size_t n = r - l, s = (size_t)(0.5 * pow((double)n, 2.0 / 3)), step = n / s;
	for (size_t j = 1; j < s; j++)
		swap_d(&a[l + j], &a[l + j * step]);
	double frac = (double)(k - l) / (double)n, off = sqrt((double)s);
	double at = frac * (double)s + (frac <= 0.5 ? off : -off);
	size_t ks = at < 0 ? 0 : at > (double)(s - 1) ? s - 1 : (size_t)at;
	select_k(a + l, s, ks);
	swap_d(&a[l], &a[l + ks]);
}

/* The k-th smallest of a[0..n), partially reordering a so that a[0..k) <= a[k] <= a(k..n)
 * (callers rely on it: the lower half comes first). Quickselect: a pivot from a sample on a
 * large range (sample_pivot), else the median of the range's first, middle and last element;
 * a branchless partition; when few elements fall below the pivot, its equals are moved next
 * to it in a second pass (many equal values would otherwise narrow the range by one a
 * pass). */
static double select_k(double *a, size_t n, size_t k)
{
	size_t l = 0, r = n; /* k is in a[l..r) */
	while (r - l > STATS_SORT_SMALL) {
		if (r - l > STATS_SAMPLE_FROM) {
			sample_pivot(a, l, r, k);
		} else {
			size_t mid = l + (r - l) / 2;
			if (a[mid] < a[l])
				swap_d(&a[mid], &a[l]);
			if (a[r - 1] < a[mid])
				swap_d(&a[r - 1], &a[mid]);
			if (a[mid] < a[l])
				swap_d(&a[mid], &a[l]);
			swap_d(&a[l], &a[mid]); /* the pivot at a[l] */
		}
		double p = a[l];
		size_t m = l + partition_below(a + l + 1, r - l - 1, p);
		a[l] = a[m]; /* the pivot between the two parts: a[l..m) < p = a[m] <= a(m..r) */
		a[m] = p;
		if (k < m) {
			r = m;
			continue;
		}
		if (k == m)
			return p;
		size_t below = m - l, span = r - l;
		l = m + 1;
		if (below < span / 16) {
			l += partition_equal(a + l, r - l, p); /* a[m..l) == p */
			if (k < l)
				return p;
		}
	}
	for (size_t i = l + 1; i < r; i++) {
		double x = a[i];
		size_t j = i;
		for (; j > l && x < a[j - 1]; j--)
			a[j] = a[j - 1];
		a[j] = x;
	}
	return a[k];
}

double stats_median_inplace(double *x, size_t n)
{
	if (n == 0)
		return NAN;
	double hi = select_k(x, n, n / 2);
	if (n % 2)
		return hi;
	/* lower middle: the maximum of the part below n/2 */
	double lo = x[0];
	for (size_t i = 1; i < n / 2; i++)
		if (x[i] > lo)
			lo = x[i];
	return (lo + hi) / 2;
}

double stats_mad_inplace(double *x, size_t n, double med)
{
	for (size_t i = 0; i < n; i++)
		x[i] = fabs(x[i] - med);
	return stats_median_inplace(x, n);
}

double stats_mean(const double *x, size_t n)
{
	if (n == 0)
		return NAN;
	double s = 0;
	for (size_t i = 0; i < n; i++)
		s += x[i];
	return s / (double)n;
}

/* sample sd about a mean m already known (n >= 2) */
static double sd_about(const double *x, size_t n, double m)
{
	double s = 0;
	for (size_t i = 0; i < n; i++)
		s += (x[i] - m) * (x[i] - m);
	return sqrt(s / (double)(n - 1));
}

double stats_sd(const double *x, size_t n)
{
	if (n < 2)
		return NAN;
	return sd_about(x, n, stats_mean(x, n));
}

double stats_cv(const double *x, size_t n)
{
	if (n < 2)
		return NAN;
	double m = stats_mean(x, n);
	if (m == 0)
		return NAN;
	return stats_sd(x, n) / m;
}

void stats_group(const double *x, size_t n, double *scratch, struct stats_group *out)
{
	out->n = n;
	out->mean = stats_mean(x, n);
	out->sd = n >= 2 ? sd_about(x, n, out->mean) : NAN; /* the mean once, not once more in stats_sd */
	out->cv = (n >= 2 && out->mean != 0) ? out->sd / out->mean : NAN;
	if (n == 0) {
		out->median = out->mad = NAN;
		return;
	}
	memcpy(scratch, x, n * sizeof(*x));
	out->median = stats_median_inplace(scratch, n);
	out->mad = stats_mad_inplace(scratch, n, out->median);
}

void stats_robust(double *x, size_t n, struct stats_group *out)
{
	out->n = n;
	out->mean = out->sd = out->cv = NAN;
	out->median = stats_median_inplace(x, n);
	out->mad = n ? stats_mad_inplace(x, n, out->median) : NAN;
}
