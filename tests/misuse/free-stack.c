/* free-stack.c -- free stack addresses (pointers mialloc does not own).
 * Every build: ignored, the stack is never written.  release: one warning
 * for the first such pointer; secure/debug: an error (EFAULT). */
#include "misuse.h"

static int check_stack(const volatile unsigned char *buf, size_t n, unsigned char fill) {
  for (size_t i = 0; i < n; i++)
    if (buf[i] != fill) return 0;
  return 1;
}

int main(int argc, char **argv) {
  misuse_init(argc, argv);
  const size_t size = 64;
  unsigned char stack_buf[256];
  memset(stack_buf, 0x3c, sizeof stack_buf);
  misuse_neighbours(size, 48);
  misuse_say("stack pointer %p", (void *)(stack_buf + 16));
  mi_free(stack_buf + 16);
  misuse_say("stack pointer %p", (void *)(stack_buf + 128));
  mi_free(stack_buf + 128);
  misuse_say("stack pointer %p", (void *)stack_buf);
  free(stack_buf);   /* the malloc name too: libmialloc provides it */
  misuse_say("returned from the frees");
  if (check_stack(stack_buf, sizeof stack_buf, 0x3c))
    misuse_say("stack buffer intact");
  else {
    misuse_say("CORRUPTION: the stack buffer was written");
    misuse_corrupt++;
  }
  misuse_verify_neighbours("after the stack frees", NULL, NULL);
  misuse_fresh_blocks(size, MISUSE_FRESH, NULL, 0);
  misuse_free_neighbours();
  return misuse_done();
}
