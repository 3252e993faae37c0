package org.cognis.analysis.ja;

import java.util.Map;
import java.util.function.UnaryOperator;

import org.apache.lucene.analysis.StopFilter;
import org.apache.lucene.analysis.TokenStream;
import org.apache.lucene.analysis.ja.JapaneseAnalyzer;
import org.apache.lucene.analysis.ja.JapaneseBaseFormFilter;
import org.apache.lucene.analysis.ja.JapaneseKatakanaStemFilter;
import org.apache.lucene.analysis.ja.JapanesePartOfSpeechStopFilter;
import org.opensearch.common.settings.Settings;
import org.opensearch.index.IndexSettings;
import org.opensearch.index.analysis.AbstractTokenFilterFactory;
import org.opensearch.index.analysis.TokenFilterFactory;
import org.opensearch.indices.analysis.AnalysisModule.AnalysisProvider;

/** The token filters of a kuromoji chain, with Lucene's default stop tags and stop words. */
final class JapaneseFilterFactories {
    private JapaneseFilterFactories() {}

    static Map<String, AnalysisProvider<TokenFilterFactory>> all() {
        return Map.of(
            // Inflected verbs and adjectives to their dictionary form (引っ越して -> 引っ越す).
            "kuromoji_baseform",
            (index, env, name, settings) -> new Filter(index, name, settings, JapaneseBaseFormFilter::new),
            // Particles, auxiliary verbs, punctuation out.
            "kuromoji_part_of_speech",
            (index, env, name, settings) -> new Filter(index, name, settings,
                stream -> new JapanesePartOfSpeechStopFilter(stream, JapaneseAnalyzer.getDefaultStopTags())),
            // Lucene's Japanese stop words (これ, それ, ある, いる, ...).
            "ja_stop",
            (index, env, name, settings) -> new Filter(index, name, settings,
                stream -> new StopFilter(stream, JapaneseAnalyzer.getDefaultStopSet())),
            // The long-vowel mark off long katakana words (コンピューター -> コンピュータ).
            "kuromoji_stemmer",
            (index, env, name, settings) -> {
                int minimum = settings.getAsInt("minimum_length", JapaneseKatakanaStemFilter.DEFAULT_MINIMUM_LENGTH);
                return new Filter(index, name, settings, stream -> new JapaneseKatakanaStemFilter(stream, minimum));
            }
        );
    }

    /** One filter of the chain: a Lucene TokenFilter around the stream. */
    private static final class Filter extends AbstractTokenFilterFactory {
        private final UnaryOperator<TokenStream> filter;

        Filter(IndexSettings indexSettings, String name, Settings settings, UnaryOperator<TokenStream> filter) {
            super(indexSettings, name, settings);
            this.filter = filter;
        }

        @Override
        public TokenStream create(TokenStream stream) {
            return filter.apply(stream);
        }
    }
}
