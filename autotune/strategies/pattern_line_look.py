"""The noise floor and reach of the pattern walk's line look (`line_reach`), and why.

Why: on a long-row softmax (2560x90112, eleven chunks of 8192 exactly) five of the six cold
`pattern-ends` and `pattern-orders` runs ended 16-18% over the best anyone found.  They stood at
a chunk of 8192 or 4096 with 32 warps; the best ran 32 warps with a chunk of 32768.  Two things
kept them from it:
- The next chunk up tiles the row unevenly: where one walk stood, 16384 measured 18% slower
  than 8192, so a one-step walk does not climb to 32768, and the far-end look (`pattern-ends`)
  jumps past it to the whole row.
- Not every walk stopped to look: one spent its last six generations (about 14 s) on moves of
  about a tenth of a percent (a load's indexing, a hint), within the noise of timing one config
  twice, until the search time ran out.
The report's stops section shows the first gap (a chunk two or three doublings from the best's)
at other long rows too: 6144x24576, 4096x65536, 3072x49152.

The `line_reach` option of the pattern walk (`autotune.strategies.pattern`) answers both: a
path moves only to a neighbour faster by more than `NOISE_FLOOR` (as `min_improvement`), so a
path on a plateau stops and looks instead of drifting on noise, and its look before it stops also
takes each ordered parameter moved `radius + 1` to `LINE_REACH` steps either way from the centre
(where the space's constraints allow).  The presets `pattern-reach`, `pattern-lines` and
`pattern-ties` (`pattern_presets`) walk with both; this module keeps the two values and why.
"""

LINE_REACH = 3  # steps along an ordered parameter the look reaches: 8x either way for a power of two
# Half a percent: above how far a config's median time moves when one session times it twice (a
# few tenths of a percent on long rows), and a quarter of the 2% that counts as reaching the best.
NOISE_FLOOR = 0.005
