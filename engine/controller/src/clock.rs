//! The wall clock, in the units the controllers decide in.

/// Now, in epoch seconds.
pub fn now_epoch() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// Now, in epoch milliseconds.
pub fn now_epoch_millis() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// A clock the controllers that act at wall-clock times read (the autoscalers' stabilization
/// windows and cron schedules); tests inject their own with [`Clock::from_fn`].
#[derive(Clone, Default)]
pub struct Clock(Option<std::sync::Arc<dyn Fn() -> i64 + Send + Sync>>);

impl Clock {
    /// The system clock.
    pub fn system() -> Self {
        Clock(None)
    }

    /// A clock reading `now`, in epoch milliseconds.
    pub fn from_fn(now: impl Fn() -> i64 + Send + Sync + 'static) -> Self {
        Clock(Some(std::sync::Arc::new(now)))
    }

    /// Now, in epoch milliseconds.
    pub fn now_millis(&self) -> i64 {
        match &self.0 {
            Some(f) => f(),
            None => now_epoch_millis(),
        }
    }

    /// Now, in epoch seconds.
    pub fn now_secs(&self) -> i64 {
        self.now_millis().div_euclid(1000)
    }
}

impl std::fmt::Debug for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Clock(injected)"
        } else {
            "Clock(system)"
        })
    }
}
