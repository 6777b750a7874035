/* stats.c: quickselect median, MAD, mean, sd, CV, robust z. */
#include "stats.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

/* Wirth's selection: the k-th smallest of x[0..n), partially reordering x. */
static double select_k(double *a, size_t n, size_t k)
{
	ptrdiff_t l = 0, m = (ptrdiff_t)n - 1, kk = (ptrdiff_t)k;
	while (l < m) {
		double x = a[kk];
		ptrdiff_t i = l, j = m;
		do {
			while (a[i] < x)
				i++;
			while (x < a[j])
				j--;
			if (i <= j) {
				double t = a[i];
				a[i] = a[j];
				a[j] = t;
				i++;
				j--;
			}
		} while (i <= j);
		if (j < kk)
			l = i;
		if (kk < i)
			m = j;
	}
	return a[kk];
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

double stats_sd(const double *x, size_t n)
{
	if (n < 2)
		return NAN;
	double m = stats_mean(x, n), s = 0;
	for (size_t i = 0; i < n; i++)
		s += (x[i] - m) * (x[i] - m);
	return sqrt(s / (double)(n - 1));
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

double stats_robust_z(double v, double med, double mad, double floor)
{
	double s = mad > floor ? mad : floor;
	if (!(s > 0))
		return 0;
	return (v - med) / (STATS_MAD_SCALE * s);
}

void stats_group(const double *x, size_t n, double *scratch, struct stats_group *out)
{
	out->n = n;
	out->mean = stats_mean(x, n);
	out->sd = stats_sd(x, n);
	out->cv = (n >= 2 && out->mean != 0) ? out->sd / out->mean : NAN;
	if (n == 0) {
		out->median = out->mad = NAN;
		return;
	}
	memcpy(scratch, x, n * sizeof(*x));
	out->median = stats_median_inplace(scratch, n);
	out->mad = stats_mad_inplace(scratch, n, out->median);
}
