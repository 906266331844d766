/*
 * The reference CUSE server for `kfd-bench cuse`: a minimal libfuse3 CUSE device that answers
 * AMDKFD_IOC_GET_VERSION and AMDKFD_IOC_WAIT_EVENTS (one unsignaled event, timeout 0) the way
 * cuse-kfd does, with the same RETRY rounds, so the two round trips compare like for like.
 * Built by the bench against Debian's libfuse3-dev; usage: cuse_ref -f -s? DEVNAME
 */
#define FUSE_USE_VERSION 31
#include <cuse_lowlevel.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <linux/kfd_ioctl.h>

static void ref_open(fuse_req_t req, struct fuse_file_info *fi)
{
	fuse_reply_open(req, fi);
}

static void ref_ioctl(fuse_req_t req, int cmd, void *arg, struct fuse_file_info *fi, unsigned flags,
		      const void *in_buf, size_t in_bufsz, size_t out_bufsz)
{
	(void)fi;
	(void)flags;
	switch ((unsigned)cmd) {
	case AMDKFD_IOC_GET_VERSION: {
		struct kfd_ioctl_get_version_args v = { .major_version = 1, .minor_version = 18 };
		if (out_bufsz < sizeof v) {
			struct iovec out = { arg, sizeof v };
			fuse_reply_ioctl_retry(req, NULL, 0, &out, 1);
			return;
		}
		fuse_reply_ioctl(req, 0, &v, sizeof v);
		return;
	}
	case AMDKFD_IOC_WAIT_EVENTS: {
		struct kfd_ioctl_wait_events_args a;
		if (in_bufsz < sizeof a) {
			struct iovec iov = { arg, sizeof a };
			fuse_reply_ioctl_retry(req, &iov, 1, &iov, 1);
			return;
		}
		memcpy(&a, in_buf, sizeof a);
		size_t ev = (size_t)a.num_events * sizeof(struct kfd_event_data);
		if (a.num_events > 1024) {
			fuse_reply_err(req, EINVAL);
			return;
		}
		if (in_bufsz < sizeof a + ev || out_bufsz < sizeof a + ev) {
			struct iovec iov[2] = { { arg, sizeof a }, { (void *)(uintptr_t)a.events_ptr, ev } };
			fuse_reply_ioctl_retry(req, iov, 2, iov, 2);
			return;
		}
		/* Every event is unsignaled: with timeout 0 the wait times out. */
		a.wait_result = KFD_IOC_WAIT_RESULT_TIMEOUT;
		struct iovec out[2] = { { &a, sizeof a }, { (char *)in_buf + sizeof a, ev } };
		fuse_reply_ioctl_iov(req, 0, out, 2);
		return;
	}
	default:
		fuse_reply_err(req, ENOTTY);
	}
}

static const struct cuse_lowlevel_ops ops = {
	.open = ref_open,
	.ioctl = ref_ioctl,
};

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s DEVNAME [fuse options]\n", argv[0]);
		return 2;
	}
	char devname[128];
	snprintf(devname, sizeof devname, "DEVNAME=%s", argv[1]);
	const char *dev_info_argv[] = { devname };
	struct cuse_info ci = {
		.dev_info_argc = 1,
		.dev_info_argv = dev_info_argv,
		.flags = CUSE_UNRESTRICTED_IOCTL,
	};
	/* libfuse's own argument parsing: -f stays in the foreground. */
	char *fargv[] = { argv[0], "-f", NULL };
	return cuse_lowlevel_main(2, fargv, &ci, &ops, NULL);
}
