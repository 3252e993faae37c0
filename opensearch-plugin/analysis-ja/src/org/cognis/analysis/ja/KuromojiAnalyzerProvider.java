package org.cognis.analysis.ja;

import org.apache.lucene.analysis.ja.JapaneseAnalyzer;
import org.opensearch.common.settings.Settings;
import org.opensearch.env.Environment;
import org.opensearch.index.IndexSettings;
import org.opensearch.index.analysis.AbstractIndexAnalyzerProvider;

/** `kuromoji`: Lucene's JapaneseAnalyzer (kuromoji tokenizer in `mode`, search by default; then
 * base forms, part-of-speech stop tags, full-width/half-width folding, stop words, katakana
 * stemming, lower case), as OpenSearch's analysis-kuromoji builds it without a user dictionary. */
final class KuromojiAnalyzerProvider extends AbstractIndexAnalyzerProvider<JapaneseAnalyzer> {
    private final JapaneseAnalyzer analyzer;

    KuromojiAnalyzerProvider(IndexSettings indexSettings, Environment env, String name, Settings settings) {
        super(indexSettings, name, settings);
        this.analyzer = new JapaneseAnalyzer(
            null,
            KuromojiTokenizerFactory.mode(settings),
            JapaneseAnalyzer.getDefaultStopSet(),
            JapaneseAnalyzer.getDefaultStopTags()
        );
    }

    @Override
    public JapaneseAnalyzer get() {
        return analyzer;
    }
}
