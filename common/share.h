/* share.h: where culpritd finds the files it ships beside its binary (the SQL migrations,
 * the web console). */
#ifndef CULPRIT_SHARE_H
#define CULPRIT_SHARE_H

#include <stddef.h>

/* The directory of the shipped files sub ("migrations", "console"): $env when set and not
 * empty; else, for a binary under build_dir (the build tree), source_dir (the checkout's
 * copy); else <prefix>/share/culprit/<sub> beside the binary's bin/ (an installed tree,
 * wherever it was put: cmake --install --prefix, DESTDIR, a copied tree) when it exists;
 * else install_prefix/share/culprit/<sub>. The answer is env's value or buf. */
const char *share_dir(const char *env, const char *build_dir, const char *source_dir, const char *install_prefix,
		      const char *sub, char *buf, size_t size);

#endif
