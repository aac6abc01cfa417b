/* Go values shown as Go shows them: a string quoted, a slice with its
 * length, capacity and first elements, an interface as its dynamic type and
 * data pointer. A Go value in several words arrives as its parts and then
 * the argument that shows it (probe.h, USC_SHOW_GO_STRING ...). */
#ifndef USC_OUTPUT_GOVALUE_H
#define USC_OUTPUT_GOVALUE_H

#include "output/output.h"

/* Is a a Go value govalue_append shows (a string, slice or interface; not
 * one of its parts)? */
static inline bool govalue_shows(const struct usc_fetcharg *a)
{
	return a->show >= USC_SHOW_GO_STRING && a->show <= USC_SHOW_GO_EFACE;
}

/* Append the Go value ev->site->args[i] (govalue_shows), its parts
 * being the go_parts arguments before it: text
 *   "deploy-1"   "a long string cut at 64 bytes"...   (a string)
 *   []int{len=3 cap=4: 1, 2, 3}   []int{len=9 cap=9: 1, 2, 3, 4, ...}
 *   []string{len=2 cap=2}   (elements uscope does not fetch)
 *   *errors.errorString(0xc000012345)   nil   (an interface)
 * or JSON: a string, an array of the first elements (null when they are not
 * fetched), {"type":NAME,"data":"0x..."} or null. The dynamic type's name
 * comes from the probed file (o->cache); without it, its address. A part
 * that faulted shows (fault) / null. 0 or -ENOMEM. */
int govalue_append(struct usc_output *o, const struct usc_event *ev, unsigned i);

#endif
