# Flags shared by every folder (included from each Makefile.am).
# libtromcho's layers (common/README.md); headers are included by bare name.
TC_COMMON_INCLUDES = -I$(top_srcdir)/common/util -I$(top_srcdir)/common/crypto \
	-I$(top_srcdir)/common/msgr -I$(top_srcdir)/common/kv \
	-I$(top_srcdir)/common/cluster -I$(top_srcdir)/common/image
AM_CPPFLAGS = $(TC_COMMON_INCLUDES) -I$(top_builddir)
AM_CFLAGS = -std=gnu11 -pthread $(WARN_CFLAGS) $(SAN_CFLAGS) \
	$(GNUTLS_CFLAGS) $(NETTLE_CFLAGS) $(XXHASH_CFLAGS) $(JSONC_CFLAGS)
AM_LDFLAGS = -pthread $(SAN_LDFLAGS)
LIBTROMCHO = $(top_builddir)/common/libtromcho.la
# The OSD store (store/), for the OSD, the CLI, tests and benchmarks.
STORE_CPPFLAGS = -I$(top_srcdir)/store
STORE_LIB = $(top_builddir)/store/libstore.la
