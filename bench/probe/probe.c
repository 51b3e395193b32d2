//go:build ignore

// (The line above keeps the go tool from treating this file as cgo source of
// package bench/probe, which only embeds it.)

/*
 * probe — the machine's own loopback UDP fan-out limit.
 *
 * What it measures: how many datagrams per second this machine can move
 * from one UDP socket to N UDP sockets over 127.0.0.1, sending round-robin
 * to every receiver and receiving them all, when user space does no
 * per-packet work at all.
 *
 * Why: Convene's media broker fans packets out to its subscribers over
 * loopback, and the benchmark's clients receive them on the same machine.
 * This program is the same shape stripped to the bone: one sending thread
 * (the broker's sending path) and one receiving thread (every client's
 * receiving path), so both cores are busy as in the real run, with no
 * parsing, routing, copying, timestamps or allocation per packet; the
 * kernel is the only pacing. What it delivers is therefore a ceiling for
 * any user-space broker on this machine, and the benchmark reports each
 * system's delivered packets/s as a fraction of it.
 *
 *   sender thread:   sendmmsg() in batches of BATCH (default 64), each
 *                    message addressed to the next receiver in turn, from
 *                    prebuilt sockaddr_in and one shared payload buffer;
 *   receiver thread: epoll_wait() on all receiver sockets (level-triggered)
 *                    and drains every ready socket with recvmmsg(MSG_DONTWAIT)
 *                    into one shared scratch buffer, only counting.
 *
 * After a 1 s warm-up it counts for SECONDS and prints one line of JSON:
 *   {"subscribers":N,"packet_size":S,"sent_pps":X,"delivered_pps":Y,"seconds":T}
 * where T is the measured length of the counting window. Datagrams the
 * kernel drops because a receive buffer is full are sent but not delivered.
 *
 * Between warm-up and counting the sender pauses until the receiver has
 * drained every buffer, so that no datagram sent before the window is
 * counted in it (the 4 MiB buffers can hold thousands of datagrams each,
 * and a backlog left by the warm-up would otherwise be counted as delivered
 * in the window, above what was sent). Datagrams still queued when the
 * window ends are not counted: if the receiver is the slower side,
 * delivered_pps is what it drains per second, not what the buffers absorb.
 * So delivered_pps <= sent_pps.
 *
 * With -S SOCKETS the receivers are shaped as the benchmark's load
 * generator shapes its listeners: subscriber i is the address
 * 127.77.0.1+i on one of SOCKETS sockets bound to the unspecified address
 * (the kernel delivers a datagram for 127.77.1.9:P to the socket on port
 * P), so a burst to thousands of subscribers is drained with a few
 * recvmmsg calls. Without -S every subscriber has a socket of its own on
 * 127.0.0.1. Either way the sender sets DF (IP_PMTUDISC_DO), as Convene's
 * media socket does, which spares the kernel a hashed IP ID per datagram.
 *
 * With -R the probe is the machine's limit for a relay instead: the sender
 * sends every datagram to one relay socket, a third thread (the relay)
 * reads them with recvmmsg and sends each on, round-robin to the
 * receivers, with sendmmsg from a socket of its own, with no per-packet
 * work. Every delivered datagram then crosses the kernel twice (two sends
 * and two receives), as through any user-space RTP relay, and the three
 * threads share the cores unpinned. The sender keeps at most RELAY_WINDOW
 * datagrams ahead of what the relay has read, so that a flood the relay
 * can only drop does not take CPU from it. This is the ceiling to compare a relay
 * with; the fan-out figure without -R is what a broker that sends each
 * datagram once can reach.
 *
 * Usage: probe -n SUBSCRIBERS -s SIZE -t SECONDS [-b BATCH] [-S SOCKETS] [-R]
 * Exit codes: 0 ok, 2 usage, 1 error (message on stderr).
 * It always stops by itself: a watchdog alarm ends it a few seconds after
 * the counting window should have ended, whatever happens.
 *
 * Build: cc -O2 -pthread -o probe probe.c   (Linux)
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define WARMUP_SECONDS 1.0
#define BUF_BYTES (4 << 20) /* SO_RCVBUF / SO_SNDBUF asked for */
#define MAX_BATCH 1024
#define MAX_EVENTS 1024
#define IDLE_MS 50       /* ms without arrivals that mean the buffers are empty */
#define DRAIN_MAX 10.0   /* s at most spent waiting for them to empty */
#define RELAY_WINDOW 8192 /* -R: datagrams the sender may be ahead of the relay */

static int n_subs, pkt_size, batch = 64, pin = 1, shared_socks, relay_mode;
static double seconds;

static int *rx_fds;                 /* receiver sockets */
static struct sockaddr_in *rx_addr; /* their addresses, prebuilt */
static int tx_fd, ep_fd;
static int relay_in_fd, relay_out_fd; /* -R: the relay's two sockets */

static atomic_int stop;
static atomic_int pause_req, sender_paused; /* the pause before counting */
static atomic_uint idle_polls; /* epoll_waits that timed out: all buffers empty */
static atomic_uint_fast64_t sent, delivered;
static atomic_uint_fast64_t relayed; /* -R: datagrams the relay has read */
static atomic_int thread_errno;
static const char *_Atomic thread_what;

static void usage(void) {
	fprintf(stderr, "usage: probe -n SUBSCRIBERS -s SIZE -t SECONDS [-b BATCH] [-S SOCKETS] [-R]\n"
	                "  SUBSCRIBERS 1..1000000, SIZE 1..65507 bytes, SECONDS > 0, BATCH 1..%d (default 64),\n"
	                "  SOCKETS 1..64 shared receiving sockets (default: one per subscriber)\n"
	                "  -R: send through a minimal relay thread (recvmmsg, then sendmmsg on)\n",
	        MAX_BATCH);
	exit(2);
}

static void die(const char *what) {
	fprintf(stderr, "probe: %s: %s\n", what, strerror(errno));
	exit(1);
}

/* A thread failed: remember why and stop the run. */
static void thread_fail(const char *what, int err) {
	int zero = 0;
	if (atomic_compare_exchange_strong(&thread_errno, &zero, err))
		thread_what = what;
	atomic_store(&stop, 1);
}

static void on_alarm(int sig) {
	static const char msg[] = "probe: watchdog: did not finish in time\n";
	(void)sig;
	(void)!write(2, msg, sizeof msg - 1);
	_exit(1);
}

static double now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void sleep_for(double s) {
	struct timespec ts = {(time_t)s, (long)((s - (time_t)s) * 1e9)};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static long parse_int(const char *s, long lo, long hi) {
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		usage();
	return v;
}

/* Sends SIZE-byte datagrams round-robin to every receiver until stopped.
 * msgs holds n_subs+batch prebuilt headers, entry i addressed to receiver
 * i mod n_subs, so every window of `batch` entries starting below n_subs is
 * contiguous and a send is just sendmmsg(&msgs[pos], batch). */
static void *sender(void *arg) {
	struct mmsghdr *msgs = arg;
	unsigned pos = 0;
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		if (atomic_load_explicit(&pause_req, memory_order_acquire)) {
			atomic_store(&sender_paused, 1);
			sleep_for(0.0005);
			continue;
		}
		atomic_store_explicit(&sender_paused, 0, memory_order_relaxed);
		if (relay_mode && atomic_load_explicit(&sent, memory_order_relaxed) >
		                      atomic_load_explicit(&relayed, memory_order_relaxed) + RELAY_WINDOW) {
			sleep_for(0.00002);
			continue;
		}
		/* Counted as sent before the call and corrected after it, so that
		 * a datagram is never counted as delivered before it is as sent. */
		atomic_fetch_add(&sent, (uint_fast64_t)batch);
		int r = sendmmsg(tx_fd, &msgs[pos], batch, 0);
		atomic_fetch_sub(&sent, (uint_fast64_t)(batch - (r > 0 ? r : 0)));
		if (r < 0) {
			/* Transient: a full send buffer, no kernel memory, a signal. */
			if (errno == EAGAIN || errno == ENOBUFS || errno == EINTR)
				continue;
			thread_fail("sendmmsg", errno);
			break;
		}
		pos = (pos + (unsigned)r) % (unsigned)n_subs;
	}
	return NULL;
}

/* -R: reads batches from the relay socket and sends each datagram on to
 * the next receiver in turn, as it came (its own length), until stopped.
 * The relay socket has a receive timeout so that a stop is seen. */
static void *relay(void *arg) {
	(void)arg;
	static struct mmsghdr in[MAX_BATCH], out[MAX_BATCH];
	static struct iovec iov[MAX_BATCH];
	size_t cap = (size_t)pkt_size;
	char *bufs = malloc(cap * (size_t)batch);
	if (!bufs) {
		thread_fail("malloc", ENOMEM);
		return NULL;
	}
	for (int i = 0; i < batch; i++) {
		iov[i].iov_base = bufs + (size_t)i * cap;
		in[i].msg_hdr.msg_iov = &iov[i];
		in[i].msg_hdr.msg_iovlen = 1;
		out[i].msg_hdr.msg_iov = &iov[i];
		out[i].msg_hdr.msg_iovlen = 1;
		out[i].msg_hdr.msg_namelen = sizeof(struct sockaddr_in);
	}
	unsigned next = 0;
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		for (int i = 0; i < batch; i++)
			iov[i].iov_len = cap;
		int r = recvmmsg(relay_in_fd, in, (unsigned)batch, MSG_WAITFORONE, NULL);
		if (r < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
				continue;
			thread_fail("relay recvmmsg", errno);
			break;
		}
		atomic_fetch_add_explicit(&relayed, (uint_fast64_t)r, memory_order_relaxed);
		for (int i = 0; i < r; i++) {
			iov[i].iov_len = in[i].msg_len;
			out[i].msg_hdr.msg_name = &rx_addr[next];
			next = next + 1 == (unsigned)n_subs ? 0 : next + 1;
		}
		for (int off = 0; off < r;) {
			int w = sendmmsg(relay_out_fd, &out[off], (unsigned)(r - off), 0);
			if (w < 0) {
				if (errno == EAGAIN || errno == ENOBUFS || errno == EINTR)
					break; /* dropped, as a relay would */
				thread_fail("relay sendmmsg", errno);
				free(bufs);
				return NULL;
			}
			off += w;
		}
	}
	free(bufs);
	return NULL;
}

/* Waits for readable receivers and drains them, counting datagrams. */
static void *receiver(void *arg) {
	static struct epoll_event ev[MAX_EVENTS];
	static struct mmsghdr msgs[MAX_BATCH];
	static struct iovec iov;
	static char scratch[65536]; /* every datagram lands here; contents ignored */
	(void)arg;
	iov.iov_base = scratch;
	iov.iov_len = sizeof scratch;
	for (int i = 0; i < batch; i++) {
		msgs[i].msg_hdr.msg_iov = &iov;
		msgs[i].msg_hdr.msg_iovlen = 1;
	}
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		/* Short timeout so a stop is seen even when nothing arrives. */
		int n = epoll_wait(ep_fd, ev, MAX_EVENTS, IDLE_MS);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			thread_fail("epoll_wait", errno);
			break;
		}
		if (n == 0) {
			/* Nothing arrived for IDLE_MS: every buffer is empty. */
			atomic_fetch_add(&idle_polls, 1);
			continue;
		}
		for (int i = 0; i < n; i++) {
			int fd = rx_fds[ev[i].data.u32];
			for (;;) {
				int r = recvmmsg(fd, msgs, batch, MSG_DONTWAIT, NULL);
				if (r < 0) {
					if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
						thread_fail("recvmmsg", errno);
						return NULL;
					}
					break;
				}
				atomic_fetch_add_explicit(&delivered, (uint_fast64_t)r, memory_order_relaxed);
				if (r < batch)
					break; /* drained */
			}
		}
	}
	return NULL;
}

/* Picks the first two CPUs this process may run on, one for each thread,
 * so that the two never share a core. Returns 0 if there are fewer. */
static int pick_cpus(cpu_set_t out[2]) {
	cpu_set_t all;
	int k = 0;
	if (sched_getaffinity(0, sizeof all, &all) < 0)
		return 0;
	for (int c = 0; c < CPU_SETSIZE && k < 2; c++) {
		if (CPU_ISSET(c, &all)) {
			CPU_ZERO(&out[k]);
			CPU_SET(c, &out[k]);
			k++;
		}
	}
	return k == 2;
}

/* Makes room for the receivers, the sender, epoll and stdio. */
static void raise_nofile(long need) {
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		die("getrlimit");
	if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur >= (rlim_t)need)
		return;
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < (rlim_t)need)
		rl.rlim_max = (rlim_t)need; /* only privileged processes may do this */
	rl.rlim_cur = (rlim_t)need;
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0) {
		fprintf(stderr, "probe: raising the open-file limit to %ld: %s\n", need, strerror(errno));
		exit(1);
	}
}

/* Opens a receiving socket bound to *a (its port filled in on return),
 * with a receive buffer of bufsz set by option opt, registered with epoll
 * as index idx of rx_fds. */
static int open_receiver(struct sockaddr_in *a, int opt, int bufsz, int idx) {
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		die("socket");
	if (setsockopt(fd, SOL_SOCKET, opt, &bufsz, sizeof bufsz) < 0) {
		if (opt != SO_RCVBUFFORCE || setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bufsz, sizeof bufsz) < 0)
			die("setsockopt SO_RCVBUF");
	}
	if (bind(fd, (struct sockaddr *)a, sizeof *a) < 0)
		die("bind");
	socklen_t len = sizeof *a;
	if (getsockname(fd, (struct sockaddr *)a, &len) < 0)
		die("getsockname");
	struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)idx};
	if (epoll_ctl(ep_fd, EPOLL_CTL_ADD, fd, &ev) < 0)
		die("epoll_ctl");
	return fd;
}

/* The -S shape: k sockets on the unspecified address, 32 MiB of buffer
 * each (forced past rmem_max when privileged, as the load generator
 * does), and subscriber i at 127.77.0.1+i on socket i mod k. */
static void open_shared(int k) {
	for (int j = 0; j < k; j++) {
		struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
		a.sin_addr.s_addr = htonl(INADDR_ANY);
		rx_fds[j] = open_receiver(&a, SO_RCVBUFFORCE, 32 << 20, j);
		for (int i = j; i < n_subs; i += k) {
			rx_addr[i].sin_family = AF_INET;
			rx_addr[i].sin_port = a.sin_port;
			rx_addr[i].sin_addr.s_addr = htonl(0x7f4d0001u + (uint32_t)i);
		}
	}
}

int main(int argc, char **argv) {
	int opt;
	int have_n = 0, have_s = 0, have_t = 0;
	while ((opt = getopt(argc, argv, "n:s:t:b:uS:R")) != -1) {
		switch (opt) {
		case 'n': n_subs = (int)parse_int(optarg, 1, 1000000); have_n = 1; break;
		case 's': pkt_size = (int)parse_int(optarg, 1, 65507); have_s = 1; break;
		case 'u': pin = 0; break;
		case 'b': batch = (int)parse_int(optarg, 1, MAX_BATCH); break;
		case 'S': shared_socks = (int)parse_int(optarg, 1, 64); break;
		case 'R': relay_mode = 1; break;
		case 't': {
			char *end;
			errno = 0;
			seconds = strtod(optarg, &end);
			if (errno || end == optarg || *end || !(seconds > 0) || seconds > 86400)
				usage();
			have_t = 1;
			break;
		}
		default: usage();
		}
	}
	if (!have_n || !have_s || !have_t || optind != argc)
		usage();
	if (shared_socks > n_subs)
		shared_socks = n_subs;
	if (shared_socks && n_subs > (1 << 24) - 0x4d0001)
		usage(); /* 127.77.0.1 + n must stay inside 127.0.0.0/8 */

	/* Watchdog: the run must end by itself, whatever the kernel does. */
	signal(SIGALRM, on_alarm);
	alarm((unsigned)(WARMUP_SECONDS + DRAIN_MAX + seconds) + 30);

	raise_nofile((long)(shared_socks ? shared_socks : n_subs) + 64);

	rx_fds = calloc((size_t)n_subs, sizeof *rx_fds);
	rx_addr = calloc((size_t)n_subs, sizeof *rx_addr);
	struct mmsghdr *tx_msgs = calloc((size_t)n_subs + MAX_BATCH, sizeof *tx_msgs);
	char *payload = calloc(1, (size_t)pkt_size);
	if (!rx_fds || !rx_addr || !tx_msgs || !payload)
		die("calloc");
	memset(payload, 0x5a, (size_t)pkt_size);

	ep_fd = epoll_create1(EPOLL_CLOEXEC);
	if (ep_fd < 0)
		die("epoll_create1");

	/* Receivers: shared (-S), or one per subscriber on 127.0.0.1 with an
	 * ephemeral port and as large a buffer as an unprivileged program gets
	 * (SO_RCVBUF is capped by net.core.rmem_max). */
	int bufsz = BUF_BYTES;
	if (shared_socks)
		open_shared(shared_socks);
	else
		for (int i = 0; i < n_subs; i++) {
			struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
			a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
			rx_fds[i] = open_receiver(&a, SO_RCVBUF, BUF_BYTES, i);
			rx_addr[i] = a;
		}

	/* Sender: one blocking socket; the kernel alone paces it. */
	tx_fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (tx_fd < 0)
		die("socket");
	if (setsockopt(tx_fd, SOL_SOCKET, SO_SNDBUF, &bufsz, sizeof bufsz) < 0)
		die("setsockopt SO_SNDBUF");
	int pmtu = IP_PMTUDISC_DO;
	if (setsockopt(tx_fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof pmtu) < 0)
		die("setsockopt IP_MTU_DISCOVER");
	static struct sockaddr_in relay_addr = {.sin_family = AF_INET};
	if (relay_mode) {
		/* The relay: a socket that receives (a 50 ms timeout so it sees a
		 * stop) and one that sends on, DF set like the sender's. */
		relay_addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		relay_in_fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		relay_out_fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		if (relay_in_fd < 0 || relay_out_fd < 0)
			die("socket");
		int rb = 32 << 20;
		if (setsockopt(relay_in_fd, SOL_SOCKET, SO_RCVBUFFORCE, &rb, sizeof rb) < 0 &&
		    setsockopt(relay_in_fd, SOL_SOCKET, SO_RCVBUF, &bufsz, sizeof bufsz) < 0)
			die("setsockopt SO_RCVBUF");
		struct timeval tv = {.tv_sec = 0, .tv_usec = 50000};
		if (setsockopt(relay_in_fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) < 0)
			die("setsockopt SO_RCVTIMEO");
		if (bind(relay_in_fd, (struct sockaddr *)&relay_addr, sizeof relay_addr) < 0)
			die("bind");
		socklen_t len = sizeof relay_addr;
		if (getsockname(relay_in_fd, (struct sockaddr *)&relay_addr, &len) < 0)
			die("getsockname");
		if (setsockopt(relay_out_fd, SOL_SOCKET, SO_SNDBUF, &bufsz, sizeof bufsz) < 0 ||
		    setsockopt(relay_out_fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof pmtu) < 0)
			die("setsockopt relay");
		pin = 0; /* three threads on the cores: the scheduler places them */
	}
	static struct iovec tx_iov;
	tx_iov.iov_base = payload;
	tx_iov.iov_len = (size_t)pkt_size;
	for (int i = 0; i < n_subs + MAX_BATCH; i++) {
		tx_msgs[i].msg_hdr.msg_name = relay_mode ? (void *)&relay_addr : (void *)&rx_addr[i % n_subs];
		tx_msgs[i].msg_hdr.msg_namelen = sizeof(struct sockaddr_in);
		tx_msgs[i].msg_hdr.msg_iov = &tx_iov;
		tx_msgs[i].msg_hdr.msg_iovlen = 1;
	}

	pthread_t rx_th, tx_th, rl_th;
	int e;
	cpu_set_t cpus[2];
	int pinned = pin && pick_cpus(cpus);
	if ((e = pthread_create(&rx_th, NULL, receiver, NULL)) != 0) {
		errno = e;
		die("pthread_create");
	}
	if (pinned)
		pthread_setaffinity_np(rx_th, sizeof cpus[1], &cpus[1]);
	if (relay_mode && (e = pthread_create(&rl_th, NULL, relay, NULL)) != 0) {
		errno = e;
		atomic_store(&stop, 1);
		pthread_join(rx_th, NULL);
		die("pthread_create");
	}
	if ((e = pthread_create(&tx_th, NULL, sender, tx_msgs)) != 0) {
		errno = e;
		atomic_store(&stop, 1);
		pthread_join(rx_th, NULL);
		die("pthread_create");
	}
	if (pinned)
		pthread_setaffinity_np(tx_th, sizeof cpus[0], &cpus[0]);

	sleep_for(WARMUP_SECONDS);

	/* Pause the sender and let the receiver drain: once its epoll_wait has
	 * timed out after the sender stopped, every buffer is empty. If they
	 * are not empty after DRAIN_MAX, the receiver is the slower side and
	 * stays busy through the window anyway, so counting starts regardless. */
	atomic_store(&pause_req, 1);
	double give_up = now() + DRAIN_MAX;
	while (!atomic_load(&sender_paused) && !atomic_load(&stop) && now() < give_up)
		sleep_for(0.0005);
	unsigned idle0 = atomic_load(&idle_polls);
	while (atomic_load(&idle_polls) == idle0 && !atomic_load(&stop) && now() < give_up)
		sleep_for(0.001);

	/* Count: delivered is read before sent at the end so that every
	 * datagram counted as delivered was counted as sent. */
	uint64_t s0 = atomic_load(&sent), d0 = atomic_load(&delivered);
	double t0 = now();
	atomic_store_explicit(&pause_req, 0, memory_order_release);
	sleep_for(seconds);
	uint64_t d1 = atomic_load(&delivered), s1 = atomic_load(&sent);
	double t1 = now();
	atomic_store(&stop, 1);
	pthread_join(tx_th, NULL);
	pthread_join(rx_th, NULL);
	if (relay_mode)
		pthread_join(rl_th, NULL);

	int terr = atomic_load(&thread_errno);
	if (terr) {
		fprintf(stderr, "probe: %s: %s\n", thread_what, strerror(terr));
		return 1;
	}
	double dt = t1 - t0;
	printf("{\"subscribers\":%d,\"packet_size\":%d,\"sent_pps\":%.1f,\"delivered_pps\":%.1f,\"seconds\":%.3f,\"relay\":%s}\n",
	       n_subs, pkt_size, (double)(s1 - s0) / dt, (double)(d1 - d0) / dt, dt, relay_mode ? "true" : "false");
	if (fflush(stdout) != 0)
		die("writing the result");
	return 0;
}
