//! A TL's numeric settings as a typed table: each [`Knob`] names its
//! `UCC_TL_<NAME>_*` variable, its default and documentation (what
//! `ferrocoll-info -c` prints), its unit, its bounds, and the field of the
//! TL's configuration struct it fills. One reader parses every table, so
//! every TL reports a bad value the same way, naming the variable.

use ferrocoll_core::config::{Config, ConfigField, parse_size};
use ferrocoll_core::{Error, Result};

/// How a knob's value is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unit {
    /// A plain number (a radix, a count).
    Count,
    /// A size with an optional binary unit (`256K`, `1M`).
    Bytes,
}

/// One numeric setting of a TL's configuration `C`.
pub(crate) struct Knob<C> {
    /// The variable, its default and what it does.
    pub field: ConfigField,
    /// How the value is written.
    pub unit: Unit,
    /// Smallest accepted value.
    pub min: usize,
    /// Largest accepted value.
    pub max: usize,
    /// The field it sets.
    pub slot: fn(&mut C) -> &mut usize,
}

impl<C> Knob<C> {
    fn parse(&self, value: &str) -> Result<usize> {
        let name = self.field.name;
        let n = match self.unit {
            Unit::Count => value
                .trim()
                .parse::<usize>()
                .map_err(|e| Error::invalid_param(format!("{name}={value:?} does not parse: {e}")))?,
            Unit::Bytes => {
                let n = parse_size(value).map_err(|e| e.prefixed(name))?;
                usize::try_from(n).map_err(|_| Error::invalid_param(format!("{name}={value} is too large")))?
            }
        };
        if n < self.min {
            return Err(Error::invalid_param(format!("{name}={value} is below its minimum {}", self.min)));
        }
        if n > self.max {
            return Err(Error::invalid_param(format!("{name}={value} is above its maximum {}", self.max)));
        }
        Ok(n)
    }
}

/// Fill `into` from `config`: each knob's variable when set, else
/// `default_of(knob)` when that says something (a TL-wide override), else the
/// knob's documented default. A value that does not parse or is out of
/// bounds is an error naming the variable.
pub(crate) fn read<C>(
    config: &Config,
    knobs: &[Knob<C>],
    into: &mut C,
    default_of: &dyn Fn(&Knob<C>) -> Option<usize>,
) -> Result<()> {
    for k in knobs {
        // `default_of` only where the default is wanted: it may measure
        // the machine (`UCC_TL_SHM_CMA_THRESHOLD`).
        let v = match config.get(k.field.name) {
            Some(v) if !names_computed_default(k, v) => k.parse(v)?,
            // Unset, or set to a documented default that is a word
            // ("auto"), not a value: that names the computed one.
            set => match (default_of(k), set) {
                (Some(d), _) => d,
                (None, Some(v)) => k.parse(v)?,
                (None, None) => k.parse(k.field.default)?,
            },
        };
        *(k.slot)(into) = v;
    }
    Ok(())
}

/// Whether `value` is `k`'s documented default and that default is a word
/// standing for a value computed at run time (it does not parse itself).
fn names_computed_default<C>(k: &Knob<C>, value: &str) -> bool {
    value.trim().eq_ignore_ascii_case(k.field.default) && k.parse(k.field.default).is_err()
}

/// The variables of a table, for `ferrocoll-info -c`.
pub(crate) fn fields<C>(knobs: &[Knob<C>]) -> impl Iterator<Item = ConfigField> + '_ {
    knobs.iter().map(|k| k.field)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default, Debug, PartialEq)]
    struct Conf {
        radix: usize,
        chunk: usize,
    }

    const KNOBS: &[Knob<Conf>] = &[
        Knob {
            field: ConfigField { name: "UCC_TL_X_RADIX", default: "4", doc: "r" },
            unit: Unit::Count,
            min: 2,
            max: 64,
            slot: |c| &mut c.radix,
        },
        Knob {
            field: ConfigField { name: "UCC_TL_X_CHUNK", default: "8K", doc: "c" },
            unit: Unit::Bytes,
            min: 4096,
            max: 1 << 30,
            slot: |c| &mut c.chunk,
        },
    ];

    fn read_with(c: &Config) -> Result<Conf> {
        let mut conf = Conf::default();
        read(c, KNOBS, &mut conf, &|_| None)?;
        Ok(conf)
    }

    #[test]
    fn defaults_overrides_and_bounds() {
        assert_eq!(read_with(&Config::new()).unwrap(), Conf { radix: 4, chunk: 8192 });
        let mut c = Config::new();
        c.set("TL_X_RADIX", "8").set("TL_X_CHUNK", "1M");
        assert_eq!(read_with(&c).unwrap(), Conf { radix: 8, chunk: 1 << 20 });
        let mut conf = Conf::default();
        read(&Config::new(), KNOBS, &mut conf, &|k| (k.unit == Unit::Count).then_some(3)).unwrap();
        assert_eq!(conf.radix, 3);
        // A default that is a word ("auto": computed at run time) may be
        // written explicitly; a default that is a value is read as written.
        let auto: &[Knob<Conf>] = &[Knob {
            field: ConfigField { name: "UCC_TL_X_CHUNK", default: "auto", doc: "c" },
            unit: Unit::Bytes,
            min: 0,
            max: 1 << 30,
            slot: |c| &mut c.chunk,
        }];
        let mut c = Config::new();
        c.set("TL_X_CHUNK", " AUTO ");
        read(&c, auto, &mut conf, &|_| Some(12345)).unwrap();
        assert_eq!(conf.chunk, 12345);
        let e = read(&c, auto, &mut conf, &|_| None).unwrap_err().to_string();
        assert!(e.contains("UCC_TL_X_CHUNK"), "{e}");
        let mut c = Config::new();
        c.set("TL_X_RADIX", "4");
        read(&c, KNOBS, &mut conf, &|_| Some(3)).unwrap();
        assert_eq!(conf.radix, 4, "a default that is a value, set explicitly, is that value");
        // A computed default is asked for only where it is wanted (it may
        // measure the machine): not for a variable set to a value.
        let asked = std::cell::Cell::new(0);
        let mut c = Config::new();
        c.set("TL_X_CHUNK", "64K");
        read(&c, auto, &mut conf, &|_| {
            asked.set(asked.get() + 1);
            Some(1)
        })
        .unwrap();
        assert_eq!((conf.chunk, asked.get()), (64 << 10, 0));
        for (name, value, says) in [
            ("TL_X_RADIX", "1", "UCC_TL_X_RADIX=1 is below its minimum 2"),
            ("TL_X_RADIX", "x4", "UCC_TL_X_RADIX=\"x4\" does not parse"),
            ("TL_X_CHUNK", "8388608T", "UCC_TL_X_CHUNK"),
            ("TL_X_CHUNK", "2G", "UCC_TL_X_CHUNK=2G is above its maximum"),
        ] {
            let mut c = Config::new();
            c.set(name, value);
            let e = read_with(&c).unwrap_err().to_string();
            assert!(e.contains(says), "{e}");
        }
    }
}

/// Never-panic property of the knob reader (values from the environment).
#[cfg(test)]
mod parser_props {
    use proptest::prelude::*;

    use super::*;

    #[derive(Default)]
    struct Conf {
        n: usize,
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn values_in_range_or_refused_naming_the_variable(
            v in "([ +-]?[0-9]{0,25}[ kKmMgGtTbB]{0,2}|\\PC{0,12}|inf)",
            bytes in any::<bool>(),
        ) {
            let knobs = [Knob::<Conf> {
                field: ConfigField { name: "UCC_TL_X_KNOB", default: "4", doc: "" },
                unit: if bytes { Unit::Bytes } else { Unit::Count },
                min: 2,
                max: 1 << 40,
                slot: |c| &mut c.n,
            }];
            let mut c = Config::new();
            c.set("TL_X_KNOB", v.clone());
            let mut into = Conf::default();
            match read(&c, &knobs, &mut into, &|_| None) {
                Ok(()) => prop_assert!((2..=1 << 40).contains(&into.n), "{v:?} gave {}", into.n),
                Err(e) => prop_assert!(e.to_string().contains("UCC_TL_X_KNOB"), "{e}"),
            }
        }
    }
}
