/*
 * Methods compiled by the C compiler at test time, so that the argument
 * lowering of package objc is checked against the compiler's own calling
 * convention. Every method records the words it received, in order, in
 * pm_seen (the receiver and the selector first) and returns their digest.
 * No headers: the file is compiled with -nostdlib for x86-64 and aarch64.
 */

typedef unsigned long long u64;

struct S16 { u64 a, b; };    /* NSRange */
struct S24 { u64 a, b, c; }; /* MTLSize */

u64 pm_seen[64];
u64 pm_nseen;

static void start(void *self, void *sel) {
	pm_nseen = 0;
	pm_seen[pm_nseen++] = (u64)self;
	pm_seen[pm_nseen++] = (u64)sel;
}

static void see(u64 v) {
	if (pm_nseen < 64)
		pm_seen[pm_nseen++] = v;
}

static void see16(struct S16 r) { see(r.a); see(r.b); }
static void see24(struct S24 s) { see(s.a); see(s.b); see(s.c); }

/* FNV-1a over whole words: the same digest as the Go tests compute. */
static u64 digest(void) {
	u64 h = 14695981039346656037ULL;
	for (u64 i = 0; i < pm_nseen; i++) {
		h ^= pm_seen[i];
		h *= 1099511628211ULL;
	}
	return h;
}

/* Ten words: the last ones go on the stack on both architectures. */
u64 pm_words(void *self, void *sel, u64 a, u64 b, u64 c, u64 d, u64 e,
             u64 f, u64 g, u64 h, u64 i, u64 j) {
	start(self, sel);
	see(a); see(b); see(c); see(d); see(e);
	see(f); see(g); see(h); see(i); see(j);
	return digest();
}

/* An NSRange in the first free registers, then a word. */
u64 pm_range(void *self, void *sel, struct S16 r, u64 a) {
	start(self, sel);
	see16(r); see(a);
	return digest();
}

/* Words around two MTLSizes and an NSRange. */
u64 pm_mixed(void *self, void *sel, u64 a, struct S24 s, struct S16 r,
             struct S24 t, u64 b) {
	start(self, sel);
	see(a); see24(s); see16(r); see24(t); see(b);
	return digest();
}

/* Two MTLSizes (grid and threadgroup) followed by seven words, some of
 * which spill to the stack. */
u64 pm_dispatch(void *self, void *sel, struct S24 grid, struct S24 group,
                u64 a, u64 b, u64 c, u64 d, u64 e, u64 f, u64 g) {
	start(self, sel);
	see24(grid); see24(group);
	see(a); see(b); see(c); see(d); see(e); see(f); see(g);
	return digest();
}

/* x86-64: after self, sel, a, b, c one integer register is left; the
 * NSRange needs two, so it goes on the stack and d still takes the last
 * register (r9), e goes on the stack after the range. */
u64 pm_range_late3(void *self, void *sel, u64 a, u64 b, u64 c,
                   struct S16 r, u64 d, u64 e) {
	start(self, sel);
	see(a); see(b); see(c); see16(r); see(d); see(e);
	return digest();
}

/* aarch64: after self, sel and five words one register (x7) is left; the
 * NSRange goes on the stack and so does every later argument. */
u64 pm_range_late5(void *self, void *sel, u64 a, u64 b, u64 c, u64 d,
                   u64 e, struct S16 r, u64 f) {
	start(self, sel);
	see(a); see(b); see(c); see(d); see(e); see16(r); see(f);
	return digest();
}

/* An MTLSize after six words: on x86-64 it follows two spilled words on
 * the stack; on aarch64 no register is left for its address, which goes
 * on the stack. The NSRange after it finds no register either. */
u64 pm_size_late(void *self, void *sel, u64 a, u64 b, u64 c, u64 d, u64 e,
                 u64 f, struct S24 s, u64 g, struct S16 r) {
	start(self, sel);
	see(a); see(b); see(c); see(d); see(e); see(f);
	see24(s); see(g); see16(r);
	return digest();
}

/* A struct of three words returned through the hidden pointer (rdi on
 * x86-64, x8 on aarch64). */
struct S24 pm_size(void *self, void *sel, u64 a, u64 b, u64 c) {
	struct S24 s;
	start(self, sel);
	see(a); see(b); see(c);
	s.a = a * 3 + 1;
	s.b = b ^ c;
	s.c = c - a;
	return s;
}

/* A double result. */
double pm_ratio(void *self, void *sel, u64 a, u64 b) {
	start(self, sel);
	see(a); see(b);
	return (double)a / (double)b;
}

/* Registered as a BOOL method: returns v whole, so the bits above the low
 * byte are not zero when v has them. */
u64 pm_bool(void *self, void *sel, u64 v) {
	start(self, sel);
	see(v);
	return v;
}
