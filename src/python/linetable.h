/* CPython's location table (co_linetable), 3.11 to 3.15: the source line of
 * an instruction. The format (CPython's Objects/locations.md, PEP 626 and
 * 657) is a run of entries, each covering 1 to 8 code units (2 bytes each):
 *
 *   first byte  1 CCCC LLL   C: the kind of entry, L + 1: code units covered
 *   C = 0..9    short form: 1 more byte of columns; same line
 *   C = 10..12  one-line form: line += C - 10; 2 bytes: start, end column
 *   C = 13      no columns: line += svarint
 *   C = 14      long form: line += svarint; end line, start column + 1 and
 *               end column + 1 as varints
 *   C = 15      no location: these code units have no line
 *
 * A varint is 6-bit chunks, least significant first, bit 6 set on all but
 * the last; an svarint is a varint v meaning v >> 1, negated when v & 1.
 * The running line starts at co_firstlineno. Only entry headers have bit 7
 * set: as CPython does, the next entry is the next byte with bit 7 set.
 *
 * Everything is read from a caller's buffer, bounded by its length: a
 * corrupt table gives a wrong line or none, never a read outside it. */
#ifndef USC_PYTHON_LINETABLE_H
#define USC_PYTHON_LINETABLE_H

#include <stddef.h>
#include <stdint.h>

/* What PyCode_Addr2Line(code, addr) answers: the line of the instruction at
 * byte offset addr of the code whose table is tab[0..len), firstlineno its
 * co_firstlineno. A negative addr (a frame that has run nothing yet) is at
 * firstlineno; an instruction with no location, or past the table's end, or
 * a line that does not fit an int, gives -1. */
int python_linetable_line(const uint8_t *tab, size_t len, int firstlineno, int addr);

/* One entry of the table, for tests and tools: the code units [start, end)
 * it covers (bytes) and its line (-1: none). */
struct python_lineentry {
	int start, end, line;
};

/* Decode up to max entries into out. The count of entries decoded (all of
 * them when it is < max), or -1 if the table is corrupt: it does not start
 * with an entry header, a varint runs past the table or overflows, or the
 * lines or offsets leave an int. */
int python_linetable_entries(const uint8_t *tab, size_t len, int firstlineno,
			     struct python_lineentry *out, int max);

/* The line tables before 3.11, which uscope makes into the location table
 * above (so that one reader, the agent's copies and recordings need know
 * only it):
 *   PYLT_LNOTAB  3.8, 3.9: co_lnotab, pairs of (address delta, signed line
 *                delta), bytes; the last line holds to the code's end
 *   PYLT_310     3.10: co_linetable, pairs of (length in bytes, signed line
 *                delta; -128: no line), each a range of the code
 * PYLT_LOCATIONS is the location table itself (3.11 on). */
enum python_lt_format {
	PYLT_LOCATIONS = 0,
	PYLT_LNOTAB = 1,
	PYLT_310 = 2,
};

/* A bound on the code a converted table covers: 1 MiB of instructions. */
#define PYTHON_LT_CODE_MAX (1L << 20)

/* tab[0..len) in format fmt (PYLT_LNOTAB or PYLT_310) as a location table
 * of the same lines: *out malloc'd (NULL when empty), *outlen its bytes;
 * code_bytes, the size of the code (co_code), ends 3.8's last line (0:
 * unknown, the table ends there). 0, -EINVAL (not such a format; lines
 * past an int), -ENOMEM. */
int python_linetable_convert(enum python_lt_format fmt, const uint8_t *tab, size_t len,
			     int firstlineno, size_t code_bytes, uint8_t **out, size_t *outlen);

#endif
