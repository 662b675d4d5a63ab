//! The interactive UI's terminal input, waited on with poll(2) so that a
//! terminal that has gone away (tmux session killed, ssh dropped: POLLHUP,
//! or an error) is noticed. crossterm is only asked to read when the
//! terminal is still there: on a hung-up terminal its reader loops on EIO
//! or end-of-file forever, using CPU and never returning; and since the
//! terminal can hang up between a check and crossterm's read, a thread
//! also waits on [`Tty::wait_gone`] and ends the process then.

use std::fs::File;
use std::io::{self, IsTerminal};
use std::os::fd::{AsFd, BorrowedFd};
use std::time::Duration;

use rustix::event::{PollFd, PollFlags, Timespec};

/// crossterm reads stdin when it is a terminal, else /dev/tty: the same here.
pub enum Tty {
    Stdin(io::Stdin),
    Dev(File),
}

#[derive(Debug, PartialEq, Eq)]
pub enum Ready {
    /// Input (or nothing yet) on a live terminal: crossterm may look.
    Alive,
    /// Hung up or failing: nothing can be read or drawn any more.
    Gone,
}

impl Tty {
    pub fn open() -> io::Result<Tty> {
        let stdin = io::stdin();
        if stdin.is_terminal() {
            return Ok(Tty::Stdin(stdin));
        }
        Ok(Tty::Dev(File::open("/dev/tty")?))
    }

    fn fd(&self) -> BorrowedFd<'_> {
        match self {
            Tty::Stdin(s) => s.as_fd(),
            Tty::Dev(f) => f.as_fd(),
        }
    }

    /// Wait up to `timeout` for input; say whether the terminal is still there.
    pub fn wait(&self, timeout: Duration) -> Ready {
        let ts = Timespec {
            tv_sec: timeout.as_secs() as _,
            tv_nsec: timeout.subsec_nanos() as _,
        };
        let mut fds = [PollFd::from_borrowed_fd(self.fd(), PollFlags::IN)];
        match rustix::event::poll(&mut fds, Some(&ts)) {
            Ok(_) => {
                let r = fds[0].revents();
                if r.intersects(PollFlags::HUP | PollFlags::ERR | PollFlags::NVAL) {
                    Ready::Gone
                } else {
                    Ready::Alive
                }
            }
            Err(rustix::io::Errno::INTR) => Ready::Alive,
            Err(_) => Ready::Gone,
        }
    }

    /// Block until the terminal hangs up or fails (POLLHUP, POLLERR and
    /// POLLNVAL are reported without being asked for; input is not asked
    /// for, so typing does not wake this).
    pub fn wait_gone(&self) {
        loop {
            let mut fds = [PollFd::from_borrowed_fd(self.fd(), PollFlags::empty())];
            match rustix::event::poll(&mut fds, None) {
                Ok(_)
                    if fds[0]
                        .revents()
                        .intersects(PollFlags::HUP | PollFlags::ERR | PollFlags::NVAL) =>
                {
                    return
                }
                Ok(_) | Err(rustix::io::Errno::INTR) => continue,
                Err(_) => return,
            }
        }
    }
}
