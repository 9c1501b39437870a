# Flags shared by every folder (included from each Makefile.am).
AM_CPPFLAGS = -I$(top_srcdir)/common -I$(top_builddir)
AM_CFLAGS = -std=gnu11 -pthread $(WARN_CFLAGS) $(SAN_CFLAGS) \
	$(GNUTLS_CFLAGS) $(NETTLE_CFLAGS) $(XXHASH_CFLAGS) $(JSONC_CFLAGS)
AM_LDFLAGS = -pthread $(SAN_LDFLAGS)
LIBTROMCHO = $(top_builddir)/common/libtromcho.la
