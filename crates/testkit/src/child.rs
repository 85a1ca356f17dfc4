//! A child process (`gnomon serve`, `watch`, `report-server`, …) that
//! cannot outlive its test: killed and reaped when dropped, a panicking
//! test's too.

use std::ops::{Deref, DerefMut};
use std::process::{Child, Command};

/// A [`Child`] killed (SIGKILL) and waited for on drop; everything else
/// goes through to the child.
#[derive(Debug)]
pub struct Reaped(pub Child);

impl Reaped {
    /// Spawns `command`; panics with the command when it cannot start.
    pub fn spawn(command: &mut Command) -> Reaped {
        match command.spawn() {
            Ok(c) => Reaped(c),
            Err(e) => panic!("cannot start {command:?}: {e}"),
        }
    }
}

impl From<Child> for Reaped {
    fn from(c: Child) -> Reaped {
        Reaped(c)
    }
}

impl Deref for Reaped {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl DerefMut for Reaped {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for Reaped {
    fn drop(&mut self) {
        // Already gone is fine: kill fails, wait returns its status.
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
