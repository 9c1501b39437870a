/* options-pod: print tromcho.conf(5) in POD from the one option table
 * (common/util/tc_options.c), so the page lists every option with its type
 * and default and cannot drift from what the programs accept. Run at build
 * time; its output goes through pod2man. */
#include <config.h>
#include <stdio.h>
#include <string.h>
#include "tc_config.h"

/* POD escapes for text that may hold < or >. */
static void
pod_text(FILE *f, const char *s)
{
  for (; *s; s++)
    if (*s == '<')
      fputs("E<lt>", f);
    else if (*s == '>')
      fputs("E<gt>", f);
    else
      fputc(*s, f);
}

int
main(int argc, char **argv)
{
  if (argc != 2) {
    fprintf(stderr, "usage: options-pod HEAD.pod > tromcho.conf.pod\n");
    return 1;
  }
  /* The hand-written part of the page (NAME, SYNOPSIS, DESCRIPTION). */
  FILE *head = fopen(argv[1], "r");
  if (!head) {
    perror(argv[1]);
    return 1;
  }
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, head)) > 0)
    if (fwrite(buf, 1, n, stdout) != n) {
      fclose(head);
      return 1;
    }
  if (ferror(head)) {
    perror(argv[1]);
    fclose(head);
    return 1;
  }
  fclose(head);

  printf("\n=head1 OPTIONS\n\n"
         "Every option, in the order of the table the programs read them from, "
         "with its JSON type and its default.\n\n=over 4\n\n");
  for (const struct tc_opt_def *o = tc_options; o->name; o++) {
    printf("=item B<%s> (%s, default ", o->name, tc_opt_type_name(o->type));
    if (!o->defval)
      printf("unset");
    else if (!*o->defval)
      printf("\"\"");
    else {
      printf("C<");
      pod_text(stdout, o->defval);
      printf(">");
    }
    printf(")\n\n");
    pod_text(stdout, o->help);
    printf(".\n\n");
  }
  printf("=back\n\n");
  if (fflush(stdout) != 0 || ferror(stdout)) {
    perror("options-pod: stdout");
    return 1;
  }
  return 0;
}
