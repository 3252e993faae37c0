package org.cognis.analysis.ja;

import java.util.Locale;

import org.apache.lucene.analysis.Tokenizer;
import org.apache.lucene.analysis.ja.JapaneseTokenizer;
import org.opensearch.common.settings.Settings;
import org.opensearch.env.Environment;
import org.opensearch.index.IndexSettings;
import org.opensearch.index.analysis.AbstractTokenizerFactory;

/** `kuromoji_tokenizer`: settings `mode` (search, the default; normal; extended) and
 * `discard_punctuation` (true). No user dictionary. */
final class KuromojiTokenizerFactory extends AbstractTokenizerFactory {
    private final JapaneseTokenizer.Mode mode;
    private final boolean discardPunctuation;

    KuromojiTokenizerFactory(IndexSettings indexSettings, Environment env, String name, Settings settings) {
        super(indexSettings, settings, name);
        this.mode = mode(settings);
        this.discardPunctuation = settings.getAsBoolean("discard_punctuation", true);
    }

    static JapaneseTokenizer.Mode mode(Settings settings) {
        String value = settings.get("mode", JapaneseTokenizer.DEFAULT_MODE.toString());
        return JapaneseTokenizer.Mode.valueOf(value.toUpperCase(Locale.ROOT));
    }

    @Override
    public Tokenizer create() {
        return new JapaneseTokenizer(null, discardPunctuation, mode);
    }
}
