/* listen.c: see listen.h. */
#include "listen.h"

#include <event2/event.h>
#include <event2/listener.h>
#include <event2/util.h>
#include <stddef.h>
#include <string.h>

/* libevent passes an error callback the accept callback's argument (for evhttp's listener,
 * the evhttp), not one of its own: the listener finds its listen_pause here */
static struct listen_pause *watched[LISTEN_PAUSE_MAX];

static void resume_cb(evutil_socket_t fd, short what, void *arg)
{
	struct listen_pause *p = arg;

	(void)fd;
	(void)what;
	evconnlistener_enable(p->l);
}

static void error_cb(struct evconnlistener *l, void *arg)
{
	int err = EVUTIL_SOCKET_ERROR();
	struct timeval pause = {0, LISTEN_PAUSE_MS * 1000};
	struct listen_pause *p = NULL;

	(void)arg;
	for (size_t i = 0; i < LISTEN_PAUSE_MAX && !p; i++)
		if (watched[i] && watched[i]->l == l)
			p = watched[i];
	if (!p)
		return;
	p->errors++;
	log_complain(&p->complaint, LOG_ERROR, "could not accept an %s: %s; pausing accepts for %d ms", p->what,
		     evutil_socket_error_to_string(err), LISTEN_PAUSE_MS);
	evconnlistener_disable(l);
	evtimer_add(p->resume, &pause);
}

int listen_pause_init(struct listen_pause *p, struct evconnlistener *l, const char *what)
{
	size_t i = 0;

	while (i < LISTEN_PAUSE_MAX && watched[i])
		i++;
	p->l = l;
	p->what = what;
	p->resume = i < LISTEN_PAUSE_MAX ? evtimer_new(evconnlistener_get_base(l), resume_cb, p) : NULL;
	if (!p->resume) {
		log_error("could not watch the %s listener", what);
		return -1;
	}
	watched[i] = p;
	evconnlistener_set_error_cb(l, error_cb);
	return 0;
}

void listen_pause_ok(struct listen_pause *p)
{
	if (p->complaint.active && log_complaint_quiet(&p->complaint, 1000))
		log_release(&p->complaint, LOG_INFO, "accepting %ss again", p->what);
}

void listen_pause_free(struct listen_pause *p)
{
	for (size_t i = 0; i < LISTEN_PAUSE_MAX; i++)
		if (watched[i] == p)
			watched[i] = NULL;
	if (p->resume)
		event_free(p->resume);
	p->resume = NULL;
}
